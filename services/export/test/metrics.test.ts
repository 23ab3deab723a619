import type { Pool } from "pg";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { exportPage, registerFixedDataset, startExport, type ExportHarness } from "./support";

let pool: Pool;
let harness: ExportHarness;

beforeAll(async () => {
  pool = testPool();
  harness = await startExport({ METRICS_PORT: "0" });
});

afterAll(async () => {
  await harness.stop();
  await pool.end();
});

const metricValue = (text: string, line: RegExp) => Number(text.split("\n").find((l) => line.test(l))?.split(" ").pop() ?? "0");

it("counts exported rows and bytes per dataset family, and gRPC calls by code", async () => {
  const org = await createTestOrganization(pool);
  await registerFixedDataset(pool, org, "resources_chemicals");
  await pool.query(`INSERT INTO chemicals (organization_id, id, name) SELECT $1, gen_random_uuid(), 'c' || g FROM generate_series(1, 7) g`, [org]);
  const page = await exportPage(harness.client, { organizationId: org, datasetKey: "resources_chemicals" });
  await exportPage(harness.client, { organizationId: org, datasetKey: "nope" }).catch(() => undefined);
  const text = await (await fetch(`http://127.0.0.1:${harness.service.metricsPort}/metrics`)).text();
  expect(metricValue(text, /^export_rows_total\{family="resource"\}/)).toBe(7);
  expect(metricValue(text, /^export_bytes_total\{family="resource"\}/)).toBe(Buffer.byteLength(page.raw));
  expect(text).toMatch(/grpc_server_handled_total\{grpc_service="exportsvc.v1.ExportService",grpc_method="exportCsv",grpc_code="OK"\} 1/);
  expect(text).toMatch(/grpc_server_handled_total\{grpc_service="exportsvc.v1.ExportService",grpc_method="exportCsv",grpc_code="NOT_FOUND"\} 1/);
});
