import type { Queryable } from "./registry";

/** Default of TOMBSTONE_RETENTION_DAYS: how long a dataset's deletion feed keeps a tombstone. */
export const DEFAULT_TOMBSTONE_RETENTION_DAYS = 35;

/** Tombstones deleted per statement, so pruning a large backlog never holds long locks or one huge WAL burst. */
const PRUNE_BATCH = 10_000;

/**
 * The two feed logs retention prunes: a table keyed (organization_id, <scope>, <at>, <id>, seq) and its
 * watermarks (organization_id, <scope>, pruned_through_at, pruned_through_id).
 */
const FEED_LOGS = {
  tombstones: { table: "dataset_tombstones", scope: "scope", at: "deleted_at", id: "id", watermarks: "dataset_tombstone_watermarks" },
  rewrites: { table: "dataset_rewrite_log", scope: "kind", at: "rewritten_at", id: "record_id", watermarks: "dataset_rewrite_watermarks" },
} as const;

/**
 * Deletes tombstones older than the retention, batch by batch, and raises each feed's watermark to
 * the newest (deleted_at, id) it pruned, in the same statement: a deletions cursor before the
 * watermark is answered 410 DELETIONS_CURSOR_EXPIRED (services/export/src/handlers/export-deletions.ts).
 * Safe to run on several replicas at once (each batch locks the rows it deletes with SKIP LOCKED).
 * Returns the number of tombstones pruned.
 */
export const pruneTombstones = (db: Queryable, retentionDays: number): Promise<number> => pruneFeedLog(db, "tombstones", retentionDays);

/**
 * The same for the rewrite feeds' log (migration 120), kept as long as the tombstones: a rewrites
 * cursor before the watermark is answered 400 REWRITES_CURSOR_EXPIRED.
 */
export const pruneRewrites = (db: Queryable, retentionDays: number): Promise<number> => pruneFeedLog(db, "rewrites", retentionDays);

async function pruneFeedLog(db: Queryable, feed: keyof typeof FEED_LOGS, retentionDays: number): Promise<number> {
  if (!Number.isFinite(retentionDays) || retentionDays <= 0) throw new RangeError("retentionDays must be positive");
  const { table, scope, at, id, watermarks } = FEED_LOGS[feed];
  let total = 0;
  for (;;) {
    const { rows } = await db.query<{ pruned: string }>(
      `WITH doomed AS (
         SELECT organization_id, ${scope}, ${at}, ${id}, seq FROM ${table}
          WHERE ${at} < clock_timestamp() - make_interval(days => $1::int)
          ORDER BY ${at} LIMIT $2 FOR UPDATE SKIP LOCKED),
       gone AS (
         DELETE FROM ${table} t USING doomed d
          WHERE t.organization_id = d.organization_id AND t.${scope} = d.${scope} AND t.${at} = d.${at} AND t.${id} = d.${id} AND t.seq = d.seq
         RETURNING t.organization_id, t.${scope}, t.${at}, t.${id}),
       newest AS (
         SELECT DISTINCT ON (organization_id, ${scope}) organization_id, ${scope}, ${at}, ${id} FROM gone
          ORDER BY organization_id, ${scope}, ${at} DESC, ${id} DESC),
       raised AS (
         INSERT INTO ${watermarks} (organization_id, ${scope}, pruned_through_at, pruned_through_id)
         SELECT organization_id, ${scope}, ${at}, ${id} FROM newest
         ON CONFLICT (organization_id, ${scope}) DO UPDATE SET
           pruned_through_at = excluded.pruned_through_at, pruned_through_id = excluded.pruned_through_id
          WHERE (${watermarks}.pruned_through_at, ${watermarks}.pruned_through_id)
              < (excluded.pruned_through_at, excluded.pruned_through_id)
         RETURNING 1)
       SELECT count(*)::text AS pruned FROM gone`,
      [Math.ceil(retentionDays), PRUNE_BATCH],
    );
    const pruned = Number(rows[0].pruned);
    total += pruned;
    if (pruned < PRUNE_BATCH) return total;
  }
}
