import type { Pool } from "pg";
import type { Logger } from "@exportsvc/common";
import { pruneRewrites, pruneTombstones } from "@exportsvc/datasets";

/** How often the schema service prunes tombstones: retention is counted in days, so hourly is plenty. */
export const TOMBSTONE_PRUNE_INTERVAL_MS = 60 * 60 * 1000;

export interface TombstonePruning {
  stop(): Promise<void>;
}

/**
 * Prunes the deletion feeds' tombstones and the rewrite feeds' entries older than `retentionDays` at
 * start and then every hour.
 * A failed pass is logged and retried on the next tick (tombstones only wait longer).
 */
export function startTombstonePruning(pool: Pool, opts: { retentionDays: number; log: Logger; intervalMs?: number }): TombstonePruning {
  let running: Promise<void> = Promise.resolve();
  const pass = () => {
    running = Promise.all([pruneTombstones(pool, opts.retentionDays), pruneRewrites(pool, opts.retentionDays)]).then(
      ([pruned, rewritesPruned]) => {
        if (pruned > 0) opts.log.info({ pruned, retentionDays: opts.retentionDays }, "tombstones pruned");
        if (rewritesPruned > 0) opts.log.info({ pruned: rewritesPruned, retentionDays: opts.retentionDays }, "rewrite entries pruned");
      },
      (err: unknown) => opts.log.warn({ err }, "tombstone pruning failed; retrying on the next pass"),
    );
  };
  pass();
  const timer = setInterval(pass, opts.intervalMs ?? TOMBSTONE_PRUNE_INTERVAL_MS);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
