import type { Pool } from "pg";
import type { PageDataset } from "@exportsvc/datasets";

/**
 * The visibility horizon closes the hole the specification warns about ("a row's last_modified is
 * set a moment before it becomes visible, so a row can appear slightly behind a held cursor"):
 * a page only holds rows whose last_modified is strictly before the horizon, where the horizon is
 *
 * - the start of the oldest transaction still open in this database (other than the service's own
 *   read-only sessions): such a transaction stamps last_modified at or after its start and may
 *   still commit it, so nothing at or after that instant is served yet; and
 * - for a form dataset, also the last_modified of every source submission whose change is still
 *   waiting in form_dataset_changes: the materialized row will appear with that time.
 *
 * Rows at or after the horizon are served by a later call with the same cursor, so a cursor never
 * skips a row. The price is that the newest rows appear only once older writes have committed
 * (normally milliseconds). Requires that the database role can see other sessions' xact_start
 * (superuser, the same role, or pg_read_all_stats); see docs/export.md.
 */

/**
 * application_name of the service's own sessions, which never stamp source rows: exports, key
 * checks and listings only read; the schema service writes registry rows and materialized form
 * tables, whose visibility is governed by the pending change log below (a rebuild only swaps in
 * rows that already existed, with their own last_modified).
 */
const SERVICE_APPLICATIONS = ["exportsvc-export", "exportsvc-gateway", "catalog", "schema", "schema-registry-listener"];

const HORIZON_SQL = `
SELECT (extract(epoch FROM least(
          (SELECT min(a.xact_start) FROM pg_stat_activity a
            WHERE a.datname = current_database()
              AND a.backend_type = 'client backend'
              AND a.pid <> pg_backend_pid()
              AND a.xact_start IS NOT NULL
              AND a.application_name <> ALL ($1::text[])),
          CASE WHEN $2::uuid IS NULL THEN NULL ELSE
            (SELECT min(s.last_modified) FROM form_dataset_changes c
               JOIN submissions s ON s.organization_id = c.organization_id AND s.id = c.submission_id
              WHERE c.organization_id = $3::uuid AND c.form_id = $2::uuid AND c.kind = 'submission') END,
          clock_timestamp())) * 1000000)::bigint::text AS horizon`;

/** Form datasets' source_ref is the form id (grids append their path after a '/'). */
function formIdOf(dataset: PageDataset): string | null {
  if (dataset.kind !== "submission" && dataset.kind !== "grid") return null;
  const match = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i.exec(dataset.sourceRef);
  return match ? match[0] : null;
}

/** Microseconds since the Unix epoch before which every row is settled for this dataset. */
export async function visibilityHorizon(pool: Pool, organizationId: string, dataset: PageDataset): Promise<bigint> {
  const { rows } = await pool.query<{ horizon: string }>(HORIZON_SQL, [SERVICE_APPLICATIONS, formIdOf(dataset), organizationId]);
  return BigInt(rows[0].horizon);
}
