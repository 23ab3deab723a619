import type { Pool } from "pg";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { formIdOfDataset, holderLagSeconds, pageHorizon, ReplicaBehindError, type PageDataset, type PageHorizon } from "@exportsvc/datasets";

/**
 * The visibility horizon of one export page (packages/datasets/src/visibility.ts owns the rule, which
 * the catalog's changeToken shares): a page only holds rows whose last_modified is strictly before
 * it, so a held cursor never skips a row that commits late. Rows at or after it are served by a later
 * call with the same cursor. Requires that the database role can see other sessions' xact_start and
 * backend_xid (superuser, the same role, or pg_read_all_stats); see docs/export.md.
 */

/** DATABASE_READ_URL: a hot standby pages are read from, and how long a page waits for it. */
export interface ReadReplicaPool {
  pool: Pool;
  maxWaitMs: number;
}

export interface PageVisibility {
  visibleBeforeMicros: bigint;
  /** Where the page must be read: the standby once it has caught up, else the primary. */
  source: Pool;
}

export async function visibilityHorizon(
  pool: Pool,
  organizationId: string,
  dataset: PageDataset,
  opts: { metrics?: ServiceMetrics; readReplica?: ReadReplicaPool; logger?: Logger } = {},
): Promise<PageVisibility> {
  const formId = formIdOfDataset(dataset);
  let horizon: PageHorizon;
  let source = pool;
  if (opts.readReplica) {
    try {
      horizon = await pageHorizon(pool, organizationId, formId, { replica: opts.readReplica.pool, maxWaitMs: opts.readReplica.maxWaitMs });
      source = opts.readReplica.pool;
    } catch (err) {
      if (!(err instanceof ReplicaBehindError)) throw err;
      // The standby lags more than allowed: this page is read from the primary instead.
      opts.logger?.warn({ requiredLsn: err.requiredLsn, replayedLsn: err.replayedLsn }, "read replica behind; page read from the primary");
      opts.metrics?.recordReplicaFallback("page");
      horizon = await pageHorizon(pool, organizationId, formId);
    }
  } else {
    horizon = await pageHorizon(pool, organizationId, formId);
  }
  opts.metrics?.observeVisibilityHorizonLag(holderLagSeconds(horizon));
  return { visibleBeforeMicros: horizon.visibleBeforeMicros, source };
}
