import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { createPool } from "@exportsvc/db";

/** The migrated database of this jest run (see global-setup.ts). */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error("TEST_DATABASE_URL is not set: run tests through jest (global-setup)");
  return url;
}

export function testPool(): Pool {
  return createPool({ connectionString: testDatabaseUrl(), max: 4 });
}

/** A new organization, enabled for export unless told otherwise. Tests isolate themselves by organization. */
export async function createTestOrganization(pool: Pool, opts: { enabled?: boolean; name?: string } = {}): Promise<string> {
  const id = randomUUID();
  await pool.query("INSERT INTO organizations (id, name) VALUES ($1, $2)", [id, opts.name ?? `Test org ${id.slice(0, 8)}`]);
  await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, $2)", [id, opts.enabled ?? true]);
  return id;
}
