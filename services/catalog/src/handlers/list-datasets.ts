import type { Pool } from "pg";
import { Errors, ifNoneMatchHits, isUuid, type Logger, type ServiceMetrics } from "@exportsvc/common";
import {
  awaitReplayed,
  latestSettlesAtMicros,
  listingHorizon,
  loadRegistry,
  organizationListingState,
  primaryWalInsertLsn,
  ReplicaBehindError,
  storedListingVersion,
  type ListingCache,
  type Queryable,
} from "@exportsvc/datasets";
import { buildListing, renderPieces, versionEtag } from "../listing";

export interface ListDatasetsDeps {
  pool: Pool;
  /** Brings the organization's registry up to date (the schema service's SyncDatasets). */
  syncRegistry: (organizationId: string) => Promise<void>;
  /** DATABASE_READ_URL: the registry is read from this hot standby once it has caught up. */
  readReplica?: { pool: Pool; maxWaitMs: number };
  metrics?: ServiceMetrics;
  logger?: Logger;
  /** Settled listings by version (LISTING_CACHE_BYTES); absent: every request decides afresh. */
  cache?: ListingCache;
}

/**
 * Where the listing's registry reads go: the standby once it has replayed the primary's WAL up to
 * now (so a registry sync just run, and every change committed before the listing, is there:
 * read-your-writes), else, past maxWaitMs, the primary, counted in export_replica_fallbacks_total.
 * The horizon is always read on the primary, after the registry (as without a standby): counters
 * read on a standby that has replayed up to now are no older than the primary's at that instant.
 */
async function registrySource(deps: ListDatasetsDeps): Promise<Queryable> {
  if (!deps.readReplica) return deps.pool;
  const lsn = await primaryWalInsertLsn(deps.pool);
  try {
    await awaitReplayed(deps.readReplica.pool, lsn, deps.readReplica.maxWaitMs);
    return deps.readReplica.pool;
  } catch (err) {
    if (!(err instanceof ReplicaBehindError)) throw err;
    deps.logger?.warn({ requiredLsn: err.requiredLsn, replayedLsn: err.replayedLsn }, "read replica behind; listing read from the primary");
    deps.metrics?.recordReplicaFallback("listing");
    return deps.pool;
  }
}

export interface ListDatasetsResult {
  /** Strong validator, quoted as sent in the ETag header. */
  etag: string;
  /** The caller's If-None-Match matched: no pieces, `etag` is the current ETag. */
  notModified?: boolean;
  /** The entries rendered as the API shows them, in pieces (renderPieces). */
  pieces: readonly Buffer[];
  /** `etag` is this listing version's settled ETag (the gateway may then decide later 304s itself). */
  settledVersion?: string;
}

/**
 * The version ETag if every dataset is settled at `version` (docs/catalog.md, "A cheap 304"), for
 * an organization with no pending form change: the organization's latest settles_at is before the
 * session horizon, read as a listing reads it (raising the floor, so no later page uses a lower
 * one). Undefined: something is held, build the listing.
 */
async function settledEtag(db: Queryable, organizationId: string, version: string): Promise<string | undefined> {
  const horizon = await listingHorizon(db, organizationId, []);
  const settles = await latestSettlesAtMicros(db, organizationId);
  if (settles !== null && settles >= horizon.horizonMicros) return undefined;
  return versionEtag(organizationId, version);
}

/**
 * ListDatasets: the organization's live datasets, synced first when a change is pending
 * (read-your-writes). While nothing is pending and the version is one the catalog has seen all
 * settled, a 304 or an unchanged listing is answered from memory (ListingCache).
 */
export async function listDatasets(deps: ListDatasetsDeps, organizationId: string, ifNoneMatch?: string): Promise<ListDatasetsResult> {
  if (!isUuid(organizationId)) throw Errors.invalidParameter({ organization_id: ["must be a uuid"] });
  let state = await organizationListingState(deps.pool, organizationId);
  if (state.syncNeeded) {
    await deps.syncRegistry(organizationId);
    state = await organizationListingState(deps.pool, organizationId);
  }
  if (state.version !== null && !state.pending) {
    const known = deps.cache?.get(organizationId, state.version);
    if (ifNoneMatch) {
      const etag = known?.etag ?? (await settledEtag(deps.pool, organizationId, state.version));
      if (etag !== undefined) {
        if (!known) deps.cache?.set(organizationId, state.version, etag);
        if (ifNoneMatchHits(ifNoneMatch, etag)) return { etag, notModified: true, pieces: [], settledVersion: state.version };
      }
    }
    if (known?.pieces) return { etag: known.etag, pieces: known.pieces, settledVersion: state.version };
  }
  // Read before the registry: a change committed in between gives newer datasets under the older
  // version's ETag, which the next request then sees as changed (never the reverse).
  const source = await registrySource(deps);
  const version = await storedListingVersion(source, organizationId);
  const entries = await loadRegistry(source, organizationId);
  // Read after the counters, and raises the organization's floor: no page served after this
  // listing uses a lower horizon than the one its tokens were computed with. Every pending form's
  // stamp comes back, so a form dataset's horizon is lowered by its own form's.
  const horizon = await listingHorizon(deps.pool, organizationId);
  // Every token settled: the ETag is the version's, so a 304 can be decided from the version alone.
  const listing = buildListing(entries, horizon, version === null ? undefined : versionEtag(organizationId, version));
  const pieces = renderPieces(listing.datasets);
  if (listing.allSettled && version !== null) {
    deps.cache?.rendered(organizationId, version, listing.etag, pieces);
    return { etag: listing.etag, pieces, settledVersion: version };
  }
  return { etag: listing.etag, pieces };
}
