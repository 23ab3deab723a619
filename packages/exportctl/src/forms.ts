import type { Pool } from "pg";
import { ExportctlError } from "./errors";
import { requireExistingOrganization, requireUuid } from "./organizations";

export interface RebuildRequests {
  organizations: number;
  /** Forms whose rebuild was queued, per organization. */
  forms: Record<string, string[]>;
}

/**
 * Queues a rebuild of form datasets (what a publish queues), for the schema service's maintenance
 * loop to run: after a cursor key left CURSOR_KEYS (docs/cursor.md, "Stored cursors") or to retry a
 * failed dataset. Forms that are deleted or never published have no dataset to build and are left
 * out. `forms` names forms of the one organization; unknown ones are refused before anything is queued.
 */
export async function requestFormRebuilds(pool: Pool, opts: { organizationId?: string; formIds?: string[]; all?: boolean }): Promise<RebuildRequests> {
  if (opts.all === (opts.organizationId !== undefined)) throw new ExportctlError("INVALID_ARGUMENT", "give either --org <id> or --all");
  if (opts.all && opts.formIds && opts.formIds.length > 0) throw new ExportctlError("INVALID_ARGUMENT", "--form needs --org (form ids are per organization)");
  const formIds = (opts.formIds ?? []).map((id) => requireUuid(id, "--form"));
  const organizationIds =
    opts.organizationId !== undefined
      ? [await requireExistingOrganization(pool, opts.organizationId, "--org")]
      : (await pool.query<{ id: string }>("SELECT id FROM organizations ORDER BY id")).rows.map((r) => r.id);
  if (formIds.length > 0) {
    const known = await pool.query<{ id: string }>("SELECT id FROM forms WHERE organization_id = $1 AND id = ANY($2::uuid[])", [organizationIds[0], formIds]);
    const unknown = formIds.filter((id) => !known.rows.some((r) => r.id === id));
    if (unknown.length > 0) throw new ExportctlError("NOT_FOUND", `no such form in organization ${organizationIds[0]}: ${unknown.join(", ")}`);
  }
  const forms: Record<string, string[]> = {};
  // One statement per organization, keyed by it (one node on a distributed database, docs/scale-out.md).
  for (const orgId of organizationIds) {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT f.id, form_ds.request_rebuild(f.organization_id, f.id)
         FROM forms f
        WHERE f.organization_id = $1 AND f.deleted_at IS NULL AND ($2::uuid[] IS NULL OR f.id = ANY($2::uuid[]))
          AND EXISTS (SELECT 1 FROM form_versions v WHERE v.organization_id = f.organization_id AND v.form_id = f.id AND v.published_at IS NOT NULL)
        ORDER BY f.id`,
      [orgId, formIds.length > 0 ? formIds : null],
    );
    if (rows.length > 0) forms[orgId] = rows.map((r) => r.id);
  }
  return { organizations: Object.keys(forms).length, forms };
}
