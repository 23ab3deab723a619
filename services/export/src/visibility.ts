import type { Pool } from "pg";
import { BoundedMap, type Logger } from "@exportsvc/common";
import type { ExportMetrics } from "./metrics";
import { holderLagSeconds, pageHorizon, ReplicaBehindError, type PageHorizon } from "@exportsvc/datasets";

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

export interface HorizonOptions {
  metrics?: ExportMetrics;
  readReplica?: ReadReplicaPool;
  logger?: Logger;
}

/** The horizon of a page of a dataset of form `formId` (formIdOfDataset; null: not a form dataset). */
export async function visibilityHorizon(pool: Pool, organizationId: string, formId: string | null, opts: HorizonOptions = {}): Promise<PageVisibility> {
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

/**
 * The form each (organization, dataset key) named on its last page (null: not a form dataset), so
 * that the next page can start its horizon statement while its registry entry is still being read.
 * The least recently served key is forgotten first beyond `max`.
 */
export class FormIdHints {
  private readonly hints: BoundedMap<string, string | null>;
  constructor(max = 10_000) {
    this.hints = new BoundedMap(max);
  }

  get(organizationId: string, datasetKey: string): string | null | undefined {
    return this.hints.get(hintKey(organizationId, datasetKey));
  }

  set(organizationId: string, datasetKey: string, formId: string | null): void {
    this.hints.set(hintKey(organizationId, datasetKey), formId);
  }
}

const hintKey = (organizationId: string, datasetKey: string) => `${organizationId}\u0000${datasetKey}`;

/**
 * Starts a page's horizon before its registry entry is read when `hints` know the key's form, and
 * returns the function that gives the horizon once the registry has named the form: the early one
 * when the forms agree, else one computed then. A horizon may be taken at any moment before the
 * page's COPY, whose snapshot is later (docs/export.md, "Visibility horizon"), so the early start
 * only saves the page a round trip. An early horizon nobody asks for (an unknown key, a failed
 * registry read, another form) is dropped without an unhandled rejection.
 */
export function startHorizon(
  compute: (formId: string | null) => Promise<PageVisibility>,
  hints: FormIdHints | undefined,
  organizationId: string,
  datasetKey: string,
): (formId: string | null) => Promise<PageVisibility> {
  const hinted = hints?.get(organizationId, datasetKey);
  const early = hinted === undefined ? undefined : compute(hinted);
  early?.catch(() => undefined);
  return (formId) => {
    hints?.set(organizationId, datasetKey, formId);
    return early !== undefined && hinted === formId ? early : compute(formId);
  };
}
