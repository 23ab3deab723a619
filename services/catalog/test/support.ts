import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { CatalogService } from "@exportsvc/proto";
import { createClient, type Client } from "@exportsvc/rpc";
import { shapeFingerprint, type ColumnSpec } from "@exportsvc/datasets";
import { testDatabaseUrl } from "../../../test/support/db";
import { start as startSchema, loadSchemaConfig } from "../../schema/src";
import { loadCatalogConfig, start as startCatalog } from "../src";

export interface CatalogHarness {
  client: Client<typeof CatalogService>;
  stop(): Promise<void>;
}

/** Schema and catalog services in-process, talking real gRPC on free ports. */
export async function startCatalogHarness(): Promise<CatalogHarness> {
  const common = { DATABASE_URL: testDatabaseUrl(), GRPC_HOST: "127.0.0.1", GRPC_PORT: "0", LOG_LEVEL: "silent", SHUTDOWN_GRACE_MS: "1000" };
  const schema = await startSchema(loadSchemaConfig({ ...common, REGISTRY_POLL_MS: "600000", FORM_DATASETS_MAINTENANCE: "false" }));
  const catalog = await startCatalog(loadCatalogConfig({ ...common, SCHEMA_ADDRESS: `127.0.0.1:${schema.port}` }));
  const client = createClient(CatalogService, `127.0.0.1:${catalog.port}`);
  return {
    client,
    stop: async () => {
      client.close();
      await catalog.stop();
      await schema.stop();
    },
  };
}

/** A form dataset row as the form-dataset materializer would write it. */
export async function insertFormDataset(
  pool: Pool,
  org: string,
  d: { key: string; kind: "submission" | "grid"; displayName: string; parentKey?: string; state?: string; label?: string },
): Promise<void> {
  const columns: ColumnSpec[] = [
    { key: "id", dataType: "uuid", label: "ID", source: { kind: "table", column: "id" } },
    { key: "temperature", dataType: "number", label: d.label ?? "Temperature", source: { kind: "table", column: "c1" } },
    { key: "last_modified", dataType: "dateTime", label: "Last Modified", source: { kind: "table", column: "last_modified" } },
  ];
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, parent_key, columns, shape_fingerprint, state, table_name)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)`,
    [org, d.key, d.kind, randomUUID(), d.displayName, d.parentKey ?? null, JSON.stringify(columns), shapeFingerprint(columns), d.state ?? "ready", `form_ds.t_${d.key}`],
  );
}
