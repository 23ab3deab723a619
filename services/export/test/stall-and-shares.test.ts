/**
 * A page whose consumer stops reading is aborted after STREAM_STALL_TIMEOUT_MS and gives its
 * PostgreSQL connection back; connections are shared between organizations (one organization's
 * held pages never take the connections another needs).
 */
import type { Pool } from "pg";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { connectionsPerOrganization, loadExportConfig } from "../src/config";
import { exportPage, registerFixedDataset, startExport, type ExportHarness } from "./support";

let pool: Pool;
let bigOrg: string;
let smallOrg: string;

/** COPY statements running for an organization (its page queries name it). */
async function copiesRunning(organizationId: string): Promise<number> {
  const { rows } = await pool.query(
    `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY%' AND query LIKE $1 AND pid <> pg_backend_pid() AND state <> 'idle' AND backend_type = 'client backend'`,
    [`%${organizationId}%`],
  );
  return Number(rows[0].count);
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A page of the big organization read once and then never again (backpressure up to PostgreSQL). */
async function stalledStream(harness: ExportHarness, organizationId: string) {
  const stream = harness.client.exportCsv({ organizationId, datasetKey: "resources_suppliers" });
  const failed = new Promise<Error>((resolve) => stream.on("error", resolve));
  await new Promise<void>((resolve) => stream.once("data", () => resolve()));
  stream.pause();
  return { stream, failed };
}

beforeAll(async () => {
  pool = testPool();
  bigOrg = await createTestOrganization(pool);
  smallOrg = await createTestOrganization(pool);
  for (const org of [bigOrg, smallOrg]) await registerFixedDataset(pool, org, "resources_suppliers");
  // ~40 MB per page: far more than gRPC's flow-control window and the socket buffers.
  await pool.query(
    `INSERT INTO suppliers (organization_id, id, name, description)
     SELECT $1, gen_random_uuid(), 'S' || g, repeat(md5(g::text), 256) FROM generate_series(1, 5000) g`,
    [bigOrg],
  );
  await pool.query(`INSERT INTO suppliers (organization_id, id, name) SELECT $1, gen_random_uuid(), 'T' || g FROM generate_series(1, 20) g`, [smallOrg]);
});

afterAll(async () => {
  await pool.end();
});

describe("a consumer that stops reading", () => {
  let harness: ExportHarness;
  beforeAll(async () => {
    harness = await startExport({ DATABASE_POOL_MAX: "2", STREAM_STALL_TIMEOUT_MS: "3000", EXPORT_CHUNK_BYTES: "16384", METRICS_PORT: "0" });
  });
  afterAll(() => harness.stop());

  it("has its page aborted after the stall timeout, its query cancelled and its connection and share freed", async () => {
    const { stream } = await stalledStream(harness, bigOrg);
    expect(await copiesRunning(bigOrg)).toBe(1);
    await until(async () => (await copiesRunning(bigOrg)) === 0, "the stalled COPY to end");
    // The organization's share (1 of a pool of 2) and the connection are free again: pages are served.
    for (let i = 0; i < 3; i++) {
      const page = await exportPage(harness.client, { organizationId: bigOrg, datasetKey: "resources_suppliers", limit: 2 });
      expect(page.rows).toHaveLength(2);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${harness.service.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/export_stream_aborts_total\{[^}]*reason="stalled"[^}]*\} 1/);
    stream.cancel();
  });
});

describe("connection shares between organizations", () => {
  let harness: ExportHarness;
  beforeAll(async () => {
    // Long stall timeout: here nothing is aborted, only shares decide who gets a connection.
    harness = await startExport({ DATABASE_POOL_MAX: "3", DATABASE_CONNECTIONS_PER_ORGANIZATION: "2", STREAM_STALL_TIMEOUT_MS: "120000", EXPORT_CHUNK_BYTES: "16384" });
  });
  afterAll(() => harness.stop());

  it("serves another organization while one holds its whole share, and queues the holder's next call", async () => {
    const held = [await stalledStream(harness, bigOrg), await stalledStream(harness, bigOrg)];
    expect(await copiesRunning(bigOrg)).toBe(2);
    let thirdDone = false;
    const third = exportPage(harness.client, { organizationId: bigOrg, datasetKey: "resources_suppliers", limit: 1 }).then((p) => {
      thirdDone = true;
      return p;
    });
    // The pool has a connection left; the other organization gets it, page after page.
    for (let i = 0; i < 5; i++) {
      const page = await exportPage(harness.client, { organizationId: smallOrg, datasetKey: "resources_suppliers" });
      expect(page.rows).toHaveLength(20);
    }
    expect(thirdDone).toBe(false);
    // One of the organization's own pages ends: its queued call runs.
    held[0].stream.cancel();
    expect((await third).rows).toHaveLength(1);
    held[1].stream.cancel();
    await until(async () => (await copiesRunning(bigOrg)) === 0, "the cancelled COPYs to end");
  });
});

describe("configuration of the shares", () => {
  const base = { DATABASE_URL: "postgres://u@h/db", CURSOR_KEYS: "1:0123456789abcdef0123456789abcdef" };

  it("defaults to 5 per organization with a pool of 16, and to less than the pool for small pools", () => {
    expect(connectionsPerOrganization(loadExportConfig(base))).toBe(5);
    expect(loadExportConfig(base).DATABASE_POOL_MAX).toBe(16);
    expect(connectionsPerOrganization(loadExportConfig({ ...base, DATABASE_POOL_MAX: "4" }))).toBe(3);
    expect(connectionsPerOrganization(loadExportConfig({ ...base, DATABASE_POOL_MAX: "1" }))).toBe(1);
  });

  it("refuses to start with a share that leaves other organizations no connection, naming the variable", () => {
    expect(() => loadExportConfig({ ...base, DATABASE_POOL_MAX: "10", DATABASE_CONNECTIONS_PER_ORGANIZATION: "10" })).toThrow(
      /DATABASE_CONNECTIONS_PER_ORGANIZATION: must be below DATABASE_POOL_MAX \(10\)/,
    );
    expect(() => loadExportConfig({ ...base, STREAM_STALL_TIMEOUT_MS: "10" })).toThrow(/STREAM_STALL_TIMEOUT_MS/);
  });
});
