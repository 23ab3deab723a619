import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { testDatabaseUrl } from "../../../test/support/db";
import { loadSchemaConfig, start, type RunningSchemaService, type SchemaServiceOptions } from "../src";

/** An in-process schema service on a free port; polling effectively off unless asked for. */
export function startSchemaService(overrides: Record<string, string> = {}, options: SchemaServiceOptions = {}): Promise<RunningSchemaService> {
  return start(
    loadSchemaConfig({
      DATABASE_URL: testDatabaseUrl(),
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      LOG_LEVEL: "silent",
      REGISTRY_POLL_MS: "600000",
      SHUTDOWN_GRACE_MS: "1000",
      // Other suites own their organizations' form-dataset change logs; these tests never consume them.
      FORM_DATASETS_MAINTENANCE: "false",
      ...overrides,
    }),
    options,
  );
}

export interface AttributeInput {
  kind: string;
  key: string;
  name?: string;
  type?: string;
  position?: number;
}

export async function addAttribute(pool: Pool, org: string, a: AttributeInput): Promise<string> {
  const id = randomUUID();
  await pool.query(
    `INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type, position)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [org, id, a.kind, a.key, a.name ?? a.key, a.type ?? "Text", a.position ?? 0],
  );
  return id;
}

export interface RegistryRowView {
  key: string;
  generation: number;
  shape_fingerprint: string;
  columns: Array<{ key: string; dataType: string; label?: string; source: Record<string, unknown> }>;
  name_assignments: Record<string, string>;
  display_name: string | null;
  xmin: string;
}

export async function registryRows(pool: Pool, org: string): Promise<Map<string, RegistryRowView>> {
  const { rows } = await pool.query<RegistryRowView>(
    `SELECT key, generation, shape_fingerprint, columns, name_assignments, display_name, xmin::text AS xmin
       FROM dataset_registry WHERE organization_id = $1`,
    [org],
  );
  return new Map(rows.map((r) => [r.key, r]));
}

/** Waits for a condition the system reaches asynchronously; fails with `what` if it never does. */
export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for: ${what}`);
}
