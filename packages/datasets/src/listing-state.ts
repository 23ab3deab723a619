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

const LISTING_VERSION = preparedStatement("catalog-listing-version", "SELECT version::text AS version FROM dataset_listing_versions WHERE organization_id = $1");

/** The organization's stored listing version (migration 085), or null when it has none yet. */
export async function storedListingVersion(db: Queryable, organizationId: string): Promise<string | null> {
  const { rows } = await db.query<{ version: string }>({ ...LISTING_VERSION, values: [organizationId] });
  return rows[0]?.version ?? null;
}

const LATEST_SETTLES_AT = preparedStatement(
  "catalog-latest-settles-at",
  "SELECT (extract(epoch FROM max(settles_at)) * 1000000)::bigint::text AS settles FROM dataset_changes WHERE organization_id = $1",
);

/** The organization's latest dataset change settles_at (µs since the Unix epoch), null when it has none. */
export async function latestSettlesAtMicros(db: Queryable, organizationId: string): Promise<bigint | null> {
  const { rows } = await db.query<{ settles: string | null }>({ ...LATEST_SETTLES_AT, values: [organizationId] });
  return rows[0].settles === null ? null : BigInt(rows[0].settles);
}
