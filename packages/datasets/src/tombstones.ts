import { preparedStatement } from "@exportsvc/common";
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

const DELETIONS_PRUNED_PAST = preparedStatement(
  "deletions-pruned-past",
  `SELECT (pruned_through_at, pruned_through_id) > ('epoch'::timestamptz + $3::bigint * interval '1 microsecond', $4::uuid) AS expired
     FROM dataset_tombstone_watermarks WHERE organization_id = $1 AND scope = $2`,
);

/**
 * True when retention pruned a tombstone of this scope after the position (µs, id): a deletion-feed
 * client there would miss it. A position at or after the newest pruned tombstone lost nothing.
 */
export async function tombstonesPrunedPast(db: Queryable, organizationId: string, scope: string, afterMicros: bigint, afterId: string): Promise<boolean> {
  const { rows } = await db.query<{ expired: boolean }>({ ...DELETIONS_PRUNED_PAST, values: [organizationId, scope, afterMicros.toString(), afterId] });
  return rows[0]?.expired ?? false;
}

const REWRITES_PRUNED_PAST = preparedStatement(
  "rewrites-pruned-past",
  `SELECT EXISTS (
     SELECT 1 FROM dataset_rewrite_watermarks
      WHERE organization_id = $1 AND kind = ANY ($2::text[])
        AND (pruned_through_at > 'epoch'::timestamptz + $3::bigint * interval '1 microsecond'
             OR (pruned_through_at = 'epoch'::timestamptz + $3::bigint * interval '1 microsecond' AND NOT $4::boolean))) AS expired`,
);

/**
 * True when retention pruned a rewrite-log entry of these kinds at or after the position's group
 * (after it, when `groupEnded`): a rewrite-feed client there would miss rows.
 */
export async function rewritesPrunedPast(db: Queryable, organizationId: string, kinds: string[], afterMicros: bigint, groupEnded: boolean): Promise<boolean> {
  const { rows } = await db.query<{ expired: boolean }>({ ...REWRITES_PRUNED_PAST, values: [organizationId, kinds, afterMicros.toString(), groupEnded] });
  return rows[0]?.expired ?? false;
}

const PENDING_TOMBSTONES_HORIZON = preparedStatement(
  "deletions-pending-tombstones",
  `WITH pending AS (
       SELECT c.submission_id, c.created_at FROM form_dataset_changes c
        WHERE c.organization_id = $1 AND c.form_id = $3::uuid AND c.kind = 'submission')
     SELECT (extract(epoch FROM min(t.deleted_at)) * 1000000)::bigint::text AS horizon
       FROM dataset_tombstones t
      WHERE t.organization_id = $1 AND t.scope = $2
        AND t.deleted_at >= (SELECT min(created_at) FROM pending)
        AND t.id IN (SELECT submission_id FROM pending)`,
);

/**
 * A form feed's tombstones wait until the materialized table no longer holds their row: the
 * submission's change is consumed by the schema service (normally within a second). Served earlier, a
 * client could apply the tombstone and then receive the stale row from the CSV endpoint, which the
 * horizon of the rows (services/export/src/visibility.ts) may still hold back, and keep it for ever. The feed's horizon is
 * therefore also the oldest tombstone of this form whose submission still has a pending change
 * (µs since the Unix epoch; undefined when there is none, and for resource and deviation feeds, whose
 * rows are read live).
 */
export async function pendingTombstonesHorizon(db: Queryable, organizationId: string, scope: string): Promise<bigint | undefined> {
  if (!scope.startsWith("form:")) return undefined;
  // A delete writes its change row (trigger submissions_form_ds_del) before its tombstone
  // (submissions_tombstones_del: triggers fire in name order), so a pending change's tombstone is no
  // older than the change: only the feed's newest stretch is scanned, on its (organization, scope,
  // deleted_at) key, with no index on tombstone ids for deletes to maintain.
  const { rows } = await db.query<{ horizon: string | null }>({ ...PENDING_TOMBSTONES_HORIZON, values: [organizationId, scope, scope.slice("form:".length)] });
  return rows[0].horizon === null ? undefined : BigInt(rows[0].horizon);
}
