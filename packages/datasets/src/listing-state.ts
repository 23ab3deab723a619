import { preparedStatement } from "@exportsvc/common";
import { REGISTRY_SYNC_NEEDED_SQL, type Queryable } from "./registry";

/**
 * What decides whether an organization's listing can be answered without building it (docs/catalog.md,
 * "A cheap 304"), in one statement on the primary. The catalog runs it first on every listing; the
 * gateway runs it to answer an If-None-Match that names a listing version it was told is settled.
 */
export interface OrganizationListingState {
  /** The registry must be synced first (read-your-writes). */
  syncNeeded: boolean;
  /** The stored listing version (dataset_listing_versions, migration 085), null before the organization has one. */
  version: string | null;
  /** A form change of the organization is pending: a form dataset's horizon may be lowered. */
  pending: boolean;
}

// Every listing and 304 runs it first: prepared once per connection, not parsed and planned each time.
const LISTING_STATE = preparedStatement(
  "listing-state",
  `SELECT ${REGISTRY_SYNC_NEEDED_SQL} AS sync_needed,
            (SELECT version::text FROM dataset_listing_versions WHERE organization_id = $1) AS version,
            EXISTS (SELECT 1 FROM form_dataset_changes WHERE organization_id = $1 AND kind = 'submission' AND source_last_modified IS NOT NULL) AS pending`,
);

export async function organizationListingState(db: Queryable, organizationId: string): Promise<OrganizationListingState> {
  const { rows } = await db.query<{ sync_needed: boolean; version: string | null; pending: boolean }>({ ...LISTING_STATE, values: [organizationId] });
  return { syncNeeded: rows[0].sync_needed, version: rows[0].version, pending: rows[0].pending };
}

/**
 * True when an ETag learned as the settled ETag of listing version `settledVersion` is still the
 * listing's ETag: the version has not moved, no registry sync is due and no form change is pending.
 * A listing settled at a version stays settled while the version does (docs/catalog.md).
 */
export function settledEtagHolds(state: OrganizationListingState, settledVersion: string): boolean {
  return !state.syncNeeded && !state.pending && state.version === settledVersion;
}
