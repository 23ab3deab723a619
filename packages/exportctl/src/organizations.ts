import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { ExportctlError } from "./errors";

export interface OrganizationSummary {
  id: string;
  name: string;
  exportEnabled: boolean;
  createdAt: string;
  activeKeys: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function requireUuid(value: string, what: string): string {
  if (!UUID.test(value)) throw new ExportctlError("INVALID_ARGUMENT", `${what} must be a uuid, got '${value}'`);
  return value.toLowerCase();
}

/**
 * Creates the source `organizations` row and its export settings (disabled unless `enable`).
 * Re-running with the same id and name is a no-op; a different name for an existing id is an error.
 */
export async function createOrganization(
  pool: Pool,
  opts: { name: string; id?: string; enable?: boolean },
): Promise<{ id: string; name: string; exportEnabled: boolean; created: boolean }> {
  const name = opts.name.trim();
  if (name === "") throw new ExportctlError("INVALID_ARGUMENT", "--name must not be empty");
  const id = opts.id ? requireUuid(opts.id, "--id") : randomUUID();
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const inserted = await client.query("INSERT INTO organizations (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", [id, name]);
    const created = inserted.rowCount === 1;
    if (!created) {
      const existing = await client.query<{ name: string }>("SELECT name FROM organizations WHERE id = $1", [id]);
      if (existing.rows[0].name !== name) {
        throw new ExportctlError("INVALID_ARGUMENT", `organization ${id} already exists with the name '${existing.rows[0].name}'`);
      }
    }
    await client.query(
      "INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, $2) ON CONFLICT (organization_id) DO NOTHING",
      [id, opts.enable ?? false],
    );
    if (opts.enable) {
      await client.query(
        "UPDATE export_organizations SET export_enabled = true, updated_at = now() WHERE organization_id = $1 AND NOT export_enabled",
        [id],
      );
    }
    const enabled = await client.query<{ export_enabled: boolean }>("SELECT export_enabled FROM export_organizations WHERE organization_id = $1", [id]);
    await client.query("COMMIT");
    return { id, name, exportEnabled: enabled.rows[0].export_enabled, created };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Enables or disables export for an existing organization (creating its settings row if missing). */
export async function setOrganizationEnabled(pool: Pool, id: string, enabled: boolean): Promise<{ id: string; exportEnabled: boolean; changed: boolean }> {
  const orgId = requireUuid(id, "organization id");
  const exists = await pool.query("SELECT 1 FROM organizations WHERE id = $1", [orgId]);
  if (exists.rowCount === 0) throw new ExportctlError("NOT_FOUND", `organization ${orgId} does not exist`);
  const res = await pool.query(
    `INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, $2)
     ON CONFLICT (organization_id) DO UPDATE SET export_enabled = excluded.export_enabled, updated_at = now()
       WHERE export_organizations.export_enabled IS DISTINCT FROM excluded.export_enabled`,
    [orgId, enabled],
  );
  return { id: orgId, exportEnabled: enabled, changed: res.rowCount === 1 };
}

export async function listOrganizations(pool: Pool): Promise<OrganizationSummary[]> {
  const res = await pool.query<{ id: string; name: string; export_enabled: boolean | null; created_at: Date; active_keys: number }>(
    `SELECT o.id::text, o.name, e.export_enabled, o.created_at,
            (SELECT count(*)::int FROM api_keys k
              WHERE k.organization_id = o.id AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())) AS active_keys
       FROM organizations o LEFT JOIN export_organizations e ON e.organization_id = o.id
      ORDER BY o.name, o.id`,
  );
  return res.rows.map((r) => ({
    id: r.id,
    name: r.name,
    exportEnabled: r.export_enabled ?? false,
    createdAt: r.created_at.toISOString(),
    activeKeys: r.active_keys,
  }));
}
