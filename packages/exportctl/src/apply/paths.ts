import type { PoolClient } from "pg";
import { ExportctlError } from "../errors";

/**
 * Maintains the materialized tree paths: sites.path and areas.path hold the ids from the outermost
 * ancestor down to the record itself, joined by '.'. A parent that no longer exists ends the walk
 * (the record is then treated as a root). Only rows whose path really changes are written, and their
 * last_modified is left alone: a path is derived from other records.
 */
export async function recomputePaths(client: PoolClient, organizationId: string): Promise<void> {
  for (const table of ["sites", "areas"]) {
    const cyclic = await client.query<{ id: string }>(
      `WITH RECURSIVE walk(id, path) AS (
         SELECT t.id, t.id::text FROM ${table} t
          WHERE t.organization_id = $1
            AND (t.parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM ${table} p WHERE p.organization_id = $1 AND p.id = t.parent_id))
         UNION ALL
         SELECT c.id, w.path || '.' || c.id::text FROM walk w JOIN ${table} c ON c.organization_id = $1 AND c.parent_id = w.id
       ),
       updated AS (
         UPDATE ${table} t SET path = w.path FROM walk w
          WHERE t.organization_id = $1 AND t.id = w.id AND t.path IS DISTINCT FROM w.path
       )
       SELECT t.id::text AS id FROM ${table} t
        WHERE t.organization_id = $1 AND NOT EXISTS (SELECT 1 FROM walk w WHERE w.id = t.id)
        ORDER BY t.id LIMIT 5`,
      [organizationId],
    );
    if (cyclic.rowCount! > 0) {
      throw new ExportctlError(
        "INVALID_DOCUMENT",
        `${table}: parent links form a cycle; nothing was loaded`,
        cyclic.rows.map((r) => `${table} ${r.id} is its own ancestor`),
      );
    }
  }
}
