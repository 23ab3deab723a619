import type { StoredRegistryRow } from "@exportsvc/datasets";
import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import type { FormField } from "../src";

export { createTestOrganization, testPool } from "../../../test/support/db";

export const uuid = () => randomUUID();

export async function insertSite(pool: Pool, orgId: string, opts: { name?: string; timeZone?: string; parentPath?: string } = {}): Promise<string> {
  const id = uuid();
  const path = opts.parentPath ? `${opts.parentPath}.${id}` : id;
  await pool.query("INSERT INTO sites (organization_id, id, name, time_zone, path) VALUES ($1, $2, $3, $4, $5)", [
    orgId,
    id,
    opts.name ?? `Site ${id.slice(0, 4)}`,
    opts.timeZone ?? "UTC",
    path,
  ]);
  return id;
}

export async function insertForm(pool: Pool, orgId: string, name: string, fields: FormField[] | null, formId = uuid()): Promise<string> {
  await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, $3, 'F')", [orgId, formId, name]);
  if (fields) await publish(pool, orgId, formId, fields);
  return formId;
}

/** Publishes a new version of the form's field tree (the trigger queues a rebuild request). */
export async function publish(pool: Pool, orgId: string, formId: string, fields: FormField[]): Promise<void> {
  await pool.query(
    `INSERT INTO form_versions (organization_id, form_id, version, fields, published_at)
     SELECT $1, $2, COALESCE(MAX(version), 0) + 1, $3, now() FROM form_versions WHERE organization_id = $1 AND form_id = $2`,
    [orgId, formId, JSON.stringify(fields)],
  );
}

export interface SubmissionInput {
  id?: string;
  siteId?: string | null;
  status?: string;
  archived?: boolean;
  startedAt?: string | null;
  completedAt?: string | null;
  lastModified?: string;
  values?: Record<string, unknown>;
  verifications?: Record<string, string>;
  recordId?: string;
}

export async function insertSubmission(pool: Pool, orgId: string, formId: string, s: SubmissionInput = {}): Promise<string> {
  const id = s.id ?? uuid();
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, is_archived, started_at, completed_at, "values", verifications, last_modified)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, COALESCE($12::timestamptz, now()))`,
    [
      orgId,
      id,
      formId,
      s.recordId ?? `F-${id.slice(0, 6)}`,
      s.siteId ?? null,
      s.status ?? "Completed",
      s.archived ?? false,
      s.startedAt ?? null,
      s.completedAt ?? null,
      JSON.stringify(s.values ?? {}),
      JSON.stringify(s.verifications ?? {}),
      s.lastModified ?? null,
    ],
  );
  return id;
}

export type RegistryRow = Omit<StoredRegistryRow, "name_assignments">;

export async function registryRows(pool: Pool, orgId: string): Promise<RegistryRow[]> {
  const r = await pool.query<RegistryRow>(
    `SELECT key, kind, source_ref, display_name, parent_key, columns, shape_fingerprint, generation, state, table_name, error
       FROM dataset_registry WHERE organization_id = $1 AND kind IN ('submission', 'grid') ORDER BY created_at, key`,
    [orgId],
  );
  return r.rows;
}

export async function registryRow(pool: Pool, orgId: string, key: string): Promise<RegistryRow> {
  const rows = await registryRows(pool, orgId);
  const row = rows.find((r) => r.key === key);
  if (!row) throw new Error(`no registry row ${key}; have ${rows.map((r) => r.key).join(", ")}`);
  return row;
}

/** The dataset's rows as the export would read them: CSV key -> text (null = empty cell), in export order. */
export async function datasetRows(pool: Pool, orgId: string, key: string): Promise<Record<string, string | null>[]> {
  const row = await registryRow(pool, orgId, key);
  if (!row.table_name) throw new Error(`dataset ${key} has no table`);
  const isGrid = row.kind === "grid";
  // As the export prints them: text columns as stored, typed ones (id, last_modified, row_index) in their text form.
  const select = row.columns
    .map((c) => {
      if (c.source.kind !== "table") throw new Error(`column ${c.key} of ${key} is not a table column`);
      return `(${c.source.column})::text AS "${c.key}"`;
    })
    .join(", ");
  const r = await pool.query(
    `SELECT ${select} FROM ${row.table_name} WHERE organization_id = $1 ORDER BY last_modified, id${isGrid ? ", row_index" : ""}`,
    [orgId],
  );
  return r.rows;
}

export async function changeVersion(pool: Pool, orgId: string, key: string): Promise<number> {
  const r = await pool.query<{ version: string }>("SELECT version FROM dataset_changes WHERE organization_id = $1 AND dataset = $2", [orgId, key]);
  return r.rowCount ? Number(r.rows[0].version) : 0;
}

export async function tableExists(pool: Pool, qualified: string): Promise<boolean> {
  const r = await pool.query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [qualified]);
  return r.rows[0].t !== null;
}

/** Field builders for readable fixtures. */
export const field = (type: string, key: string, label: string, extra: Partial<FormField> = {}): FormField => ({
  id: uuid(),
  key,
  label,
  type,
  ...extra,
});
