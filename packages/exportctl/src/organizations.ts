import { randomUUID } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { escapeIdentifier } from "pg";
import { isUuid } from "@exportsvc/common";
import { activeKeyCondition, countActiveKeys, inTransaction } from "@exportsvc/db";
import { formLockKeys, organizationKeysLockKeys, organizationSchemaName } from "@exportsvc/form-datasets";
import { ExportctlError } from "./errors";

export interface OrganizationSummary {
  id: string;
  name: string;
  exportEnabled: boolean;
  createdAt: string;
  activeKeys: number;
}

export function requireUuid(value: string, what: string): string {
  if (!isUuid(value)) throw new ExportctlError("INVALID_ARGUMENT", `${what} must be a uuid, got '${value}'`);
  return value.toLowerCase();
}

/** The organization id, normalized, once it is a uuid of an existing organization. */
export async function requireExistingOrganization(pool: Pool, id: string, what: string): Promise<string> {
  const orgId = requireUuid(id, what);
  const exists = await pool.query("SELECT 1 FROM organizations WHERE id = $1", [orgId]);
  if (exists.rowCount === 0) throw new ExportctlError("NOT_FOUND", `organization ${orgId} does not exist`);
  return orgId;
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
  return inTransaction(pool, async (client) => {
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
    return { id, name, exportEnabled: enabled.rows[0].export_enabled, created };
  });
}

/** Enables or disables export for an existing organization (creating its settings row if missing). */
export async function setOrganizationEnabled(pool: Pool, id: string, enabled: boolean): Promise<{ id: string; exportEnabled: boolean; changed: boolean }> {
  const orgId = await requireExistingOrganization(pool, id, "organization id");
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
              WHERE k.organization_id = o.id AND ${activeKeyCondition("k")}) AS active_keys
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

export interface OrganizationDeletion {
  id: string;
  name: string;
  /** Keys that were still active (deleted only with force). */
  activeKeys: number;
  /** Materialized form dataset tables dropped. */
  droppedTables: number;
  /** Rows deleted per table, the organization's source data (cascaded from `organizations`) not itemized. */
  deletedRows: Record<string, number>;
}

const FORM_LOCK_QUERY = "SELECT id::text FROM forms WHERE organization_id = $1 ORDER BY id";

/**
 * Deletes an organization and everything exported of it in one transaction: its source data (the
 * `organizations` row cascades), its API keys, export settings, dataset registry and change logs,
 * and its materialized form dataset tables. Refuses while the organization has active keys unless
 * `force`. Every table with an `organization_id` column is cleared, so tables added later are too.
 */
export async function deleteOrganization(
  pool: Pool,
  opts: { id: string; force?: boolean },
): Promise<OrganizationDeletion> {
  const id = requireUuid(opts.id, "organization id");
  return inTransaction(pool, async (client) => {
    const org = await client.query<{ name: string }>("SELECT name FROM organizations WHERE id = $1 FOR UPDATE", [id]);
    if (org.rowCount === 0) throw new ExportctlError("NOT_FOUND", `organization ${id} does not exist`);
    const activeKeys = await countActiveKeys(client, id);
    if (activeKeys > 0 && !opts.force) {
      throw new ExportctlError(
        "KEYS_ACTIVE",
        `organization ${id} '${org.rows[0].name}' still has ${activeKeys} active API key(s); revoke them first (exportctl keys list --org ${id}) or pass --force. Nothing was deleted.`,
      );
    }
    // Wait for rebuilds and maintenance of its forms (same lock order as they take: forms, then keys).
    await client.query("SELECT pg_advisory_xact_lock(hashtext('exportctl-apply'), hashtext($1))", [id]);
    for (const { id: formId } of (await client.query<{ id: string }>(FORM_LOCK_QUERY, [id])).rows) {
      await client.query("SELECT pg_advisory_xact_lock($1, $2)", formLockKeys(id, formId));
    }
    await client.query("SELECT pg_advisory_xact_lock($1, $2)", organizationKeysLockKeys(id));

    const droppedTables = await dropFormDatasetTables(client, id);
    // Source data first: its triggers write change-log rows, which the sweep below then removes.
    await client.query("DELETE FROM organizations WHERE id = $1", [id]);
    // A sweep's deletes can fire triggers that log into tables it has already swept (a link row's
    // delete logs a rewrite entry): sweep again until a pass finds nothing.
    const deletedRows: Record<string, number> = {};
    for (let pass = 0; ; pass++) {
      const swept = await deleteFromEveryOrganizationTable(client, id);
      if (Object.keys(swept).length === 0) break;
      if (pass === MAX_SWEEPS) throw new Error(`org delete: rows still appear after ${MAX_SWEEPS} sweeps in ${Object.keys(swept).join(", ")}`);
      for (const [table, n] of Object.entries(swept)) deletedRows[table] = (deletedRows[table] ?? 0) + n;
    }
    return { id, name: org.rows[0].name, activeKeys, droppedTables, deletedRows };
  });
}

/** Sweeps over every organization table before org delete gives up (each pass removes what the previous one's triggers logged). */
const MAX_SWEEPS = 5;

async function dropFormDatasetTables(client: PoolClient, id: string): Promise<number> {
  const present = await client.query<{ ok: boolean }>("SELECT to_regclass('form_ds.dataset_tables') IS NOT NULL AS ok");
  if (!present.rows[0].ok) return 0;
  const tables = await client.query<{ table_name: string }>("SELECT table_name FROM form_ds.dataset_tables WHERE organization_id = $1", [id]);
  for (const { table_name } of tables.rows) {
    const qualified = table_name.split(".").map((part) => escapeIdentifier(part)).join(".");
    await client.query(`DROP TABLE IF EXISTS ${qualified}`);
  }
  // The organization's own schema (docs/scale-out.md), with anything a build left in it unregistered.
  await client.query(`DROP SCHEMA IF EXISTS ${escapeIdentifier(organizationSchemaName(id))} CASCADE`);
  return tables.rowCount ?? 0;
}

/** Deletes the organization's rows from every table with an organization_id column, retrying in a new order on foreign-key conflicts. */
async function deleteFromEveryOrganizationTable(client: PoolClient, id: string): Promise<Record<string, number>> {
  const tables = await client.query<{ schema: string; name: string }>(
    `SELECT c.table_schema AS schema, c.table_name AS name
       FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
      WHERE c.column_name = 'organization_id' AND t.table_type = 'BASE TABLE'
        AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
      ORDER BY 1, 2`,
  );
  const deleted: Record<string, number> = {};
  let pending = tables.rows;
  while (pending.length > 0) {
    const blocked: typeof pending = [];
    for (const table of pending) {
      const name = `${escapeIdentifier(table.schema)}.${escapeIdentifier(table.name)}`;
      await client.query("SAVEPOINT org_delete_table");
      try {
        const r = await client.query(`DELETE FROM ${name} WHERE organization_id = $1`, [id]);
        await client.query("RELEASE SAVEPOINT org_delete_table");
        if (r.rowCount) deleted[`${table.schema}.${table.name}`] = r.rowCount;
      } catch (err) {
        await client.query("ROLLBACK TO SAVEPOINT org_delete_table");
        if ((err as { code?: string }).code !== "23503") throw err;
        blocked.push(table);
      }
    }
    if (blocked.length === pending.length) throw new Error(`org delete: foreign keys block deleting from ${blocked.map((t) => t.name).join(", ")}`);
    pending = blocked;
  }
  return deleted;
}
