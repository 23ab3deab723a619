import { DECLARED_ORGANIZATION_SQL_PATTERN, leadingUuid, preparedStatement, type VisibilityHorizonHolder } from "@exportsvc/common";
import type { Queryable } from "./registry";
import { SERVICE_APPLICATION_NAMES } from "./domain/services";

/**
 * The visibility horizon (docs/export.md, "Visibility horizon"): a page serves only rows whose
 * last_modified is strictly before it, and a changeToken calls a dataset "settled" only when every
 * counted row is before it. One owner for both, so the listing never promises what a page holds back.
 *
 * For an organization it is the earliest of
 * - the statement's own start (taken before the session list is read);
 * - the xact_start of every open transaction that holds a transaction id (a writer) and either
 *   declares this organization or declares none. Sessions without an xid (readers, pg_dump, BI
 *   dashboards) never hold it: migration 040 stamps every live last_modified at or after its writer's
 *   xid assignment, so a reader that later writes stamps after any horizon computed meanwhile;
 * raised to the organization's floor (the session horizon a listing relied on while an older reader
 * was open, so it never goes back when that reader turns into a writer); and, for a form dataset, lowered to the
 * stamp of its oldest source change not yet applied to the materialized table.
 */

/** Microseconds since the Unix epoch. */
export type Micros = bigint;

export interface SessionHorizon {
  /** statement_timestamp() of the horizon query. */
  nowMicros: Micros;
  /** The session part of the horizon, floor applied: rows stamped before it have all committed. */
  horizonMicros: Micros;
  /** Oldest xact_start per kind of session (undefined: none open). Readers are reported, not applied. */
  undeclaredWriterSince?: Micros;
  declaredWriterSince?: Micros;
  readerSince?: Micros;
}

const micros = (expr: string) => `(extract(epoch FROM ${expr}) * 1000000)::bigint::text`;

/** $1 organization id (text), $2 declaration pattern, $3 service application names. */
const SESSION_HOLDERS_CTE = `
holders AS (
  SELECT min(a.xact_start) FILTER (WHERE a.backend_xid IS NOT NULL AND d.org IS NULL) AS undeclared,
         min(a.xact_start) FILTER (WHERE a.backend_xid IS NOT NULL AND d.org = $1::text) AS declared,
         min(a.xact_start) FILTER (WHERE a.backend_xid IS NULL) AS reader
    FROM pg_stat_activity a
    CROSS JOIN LATERAL (SELECT substring(lower(a.application_name) from $2::text) AS org) d
   WHERE a.datname = current_database()
     AND a.backend_type = 'client backend'
     AND a.pid <> pg_backend_pid()
     AND a.xact_start IS NOT NULL
     AND a.application_name <> ALL ($3::text[])
),
sessions AS (
  SELECT h.*, least(statement_timestamp(), h.undeclared, h.declared) AS horizon FROM holders h
)`;

const SESSION_COLUMNS = `${micros("statement_timestamp()")} AS now, ${micros("s.undeclared")} AS undeclared,
       ${micros("s.declared")} AS declared, ${micros("s.reader")} AS reader`;

/**
 * Oldest pending (not yet materialized) source stamp of a form of organization $1, exactly: one probe
 * of migration 040's partial index, used where the form has no pending floor yet. `c.seq IS NOT NULL`
 * (always true) reads the heap, so the probe is a plain index scan, which marks the dead entries that
 * consumed changes leave as dead for the next probe (an index-only scan never does).
 */
const pendingOfForm = (formParam: string) => `(SELECT c.source_last_modified FROM form_dataset_changes c
   WHERE c.organization_id = $1::uuid AND c.form_id = ${formParam} AND c.kind = 'submission' AND c.source_last_modified IS NOT NULL
     AND c.seq IS NOT NULL
   ORDER BY c.source_last_modified LIMIT 1)`;

/**
 * The pending part of a form's horizon: its pending floor (migration 090: one primary-key probe,
 * whatever the change log's backlog or dead rows), or the exact probe where none was raised yet.
 * `held`: whether the value may lie behind the present (always so for the exact probe).
 */
const pendingPartOfForm = (formParam: string) => `${micros(`coalesce(fl.pending_from, ${pendingOfForm(formParam)})`)} AS pending,
       coalesce(fl.held, true) AS held
  FROM (SELECT 1) one
  LEFT JOIN form_dataset_pending_floors fl ON fl.organization_id = $1::uuid AND fl.form_id = ${formParam}`;

/**
 * One export page, session part: reads the floor, never writes it; with a form id in $4, also that
 * form's pending floor (NULL: the form has none). A floor bounds every change pending whenever it is
 * read, however old the snapshot (see raisePendingFloors), so it needs no statement of its own.
 */
const PAGE_HORIZON_SQL = preparedStatement(
  "page-horizon",
  `
WITH ${SESSION_HOLDERS_CTE}
SELECT ${SESSION_COLUMNS},
       ${micros("greatest(s.horizon, (SELECT f.horizon FROM export_visibility_floors f WHERE f.organization_id = $1::uuid))")} AS horizon,
       ${micros("fl.pending_from")} AS pending, fl.held
  FROM sessions s
  LEFT JOIN form_dataset_pending_floors fl ON fl.organization_id = $1::uuid AND fl.form_id = $4::uuid`,
);

/**
 * One export page of a form without a pending floor, form part: a statement of its own, so that its
 * snapshot is taken after the session list was read (a statement's snapshot predates its own reading
 * of pg_stat_activity; a submission committed in between must be seen here, as pending or as
 * applied). $1 org, $2 form.
 */
const PAGE_PENDING_SQL = preparedStatement("page-pending", `SELECT ${pendingPartOfForm("$2::uuid")}`);
/**
 * The listing: makes sure no page served after it uses a lower session horizon than its tokens do.
 * Only an open reader older than the horizon can later lower it (by turning into a writer: its
 * xact_start predates its first write); writers already count and later transactions start later.
 * So the floor is written only while such a reader is open, and at most about once a second per
 * organization (within a second of the stored floor the tokens use the stored floor, a little lower,
 * which is always safe). This keeps the row's versions few while the reader's snapshot stops pruning.
 * Reads the pending part of every form given in $4 (NULL: of every form with a floor or a pending
 * change): its pending floor, else its exact oldest stamp.
 */
const PENDING_STAMP = `FROM form_dataset_changes c
   WHERE c.organization_id = $1::uuid AND c.kind = 'submission' AND c.source_last_modified IS NOT NULL`;
const LISTING_HORIZON_SQL = `
WITH RECURSIVE ${SESSION_HOLDERS_CTE},
-- The oldest pending stamp of every form that has pending changes, by a skip scan of the partial
-- index (organization_id, form_id, source_last_modified): one probe per such form, whatever the
-- organization's number of forms (issue 15: 10k probes for 10k datasets was a third of a listing).
pending_forms AS (
  (SELECT c.form_id, c.source_last_modified AS since ${PENDING_STAMP} ORDER BY c.form_id, c.source_last_modified LIMIT 1)
  UNION ALL
  SELECT n.form_id, n.since FROM pending_forms p CROSS JOIN LATERAL (
    SELECT c.form_id, c.source_last_modified AS since ${PENDING_STAMP} AND c.form_id > p.form_id
     ORDER BY c.form_id, c.source_last_modified LIMIT 1) n
),
stored AS (
  SELECT f.horizon FROM export_visibility_floors f WHERE f.organization_id = $1::uuid
),
raised AS (
  INSERT INTO export_visibility_floors AS f (organization_id, horizon)
  SELECT $1::uuid, s.horizon FROM sessions s
   WHERE s.reader < s.horizon
     AND NOT EXISTS (SELECT 1 FROM stored WHERE s.horizon < stored.horizon + interval '1 second')
  ON CONFLICT (organization_id) DO UPDATE SET horizon = greatest(f.horizon, excluded.horizon)
  RETURNING f.horizon
)
SELECT ${SESSION_COLUMNS},
       ${micros(`CASE WHEN EXISTS (SELECT 1 FROM raised) THEN (SELECT horizon FROM raised)
                      WHEN s.reader < s.horizon THEN (SELECT horizon FROM stored)
                      ELSE greatest(s.horizon, (SELECT horizon FROM stored)) END`)} AS horizon,
       (SELECT coalesce(json_object_agg(p.form_id, p.pending), '{}') FROM (
          SELECT f.form_id, ${micros("coalesce(fl.pending_from, pf.since)")} AS pending
            FROM (SELECT f4.form_id FROM unnest($4::uuid[]) AS f4(form_id)
                  -- No form ids: every form with a pending floor or a pending change (the listing's case).
                  UNION SELECT fl0.form_id FROM form_dataset_pending_floors fl0 WHERE $4::uuid[] IS NULL AND fl0.organization_id = $1::uuid
                  UNION SELECT pf0.form_id FROM pending_forms pf0 WHERE $4::uuid[] IS NULL) AS f(form_id)
            LEFT JOIN form_dataset_pending_floors fl ON fl.organization_id = $1::uuid AND fl.form_id = f.form_id
            LEFT JOIN pending_forms pf ON pf.form_id = f.form_id) p
         WHERE p.pending IS NOT NULL)::text AS pending
  FROM sessions s`;

interface HorizonRow {
  now: string;
  undeclared: string | null;
  declared: string | null;
  reader: string | null;
  horizon: string;
  pending: string | null;
}

const opt = (v: string | null): Micros | undefined => (v === null ? undefined : BigInt(v));

function sessionHorizon(row: HorizonRow): SessionHorizon {
  const h: SessionHorizon = { nowMicros: BigInt(row.now), horizonMicros: BigInt(row.horizon) };
  if (row.undeclared !== null) h.undeclaredWriterSince = BigInt(row.undeclared);
  if (row.declared !== null) h.declaredWriterSince = BigInt(row.declared);
  if (row.reader !== null) h.readerSince = BigInt(row.reader);
  return h;
}

const params = (organizationId: string) => [organizationId.toLowerCase(), DECLARED_ORGANIZATION_SQL_PATTERN, SERVICE_APPLICATION_NAMES];

export interface PageHorizon extends SessionHorizon {
  /**
   * Form datasets: no change of the form still to be applied is stamped before it (its pending
   * floor, or the oldest unapplied stamp where the form has none). Undefined: nothing pending.
   */
  pendingSince?: Micros;
  /** Whether pendingSince was held back by something (false: a floor that was current when raised). */
  pendingHeld?: boolean;
  /** The horizon the page uses: the session horizon, lowered to pendingSince. */
  visibleBeforeMicros: Micros;
}

/**
 * Reading pages from a hot standby (issue 18, item 4). The standby's own pg_stat_activity does not
 * show the primary's writers, so the session part of the horizon is always computed on the primary.
 * The standby may lag: a row committed on the primary before the session list was read must be
 * visible to the page, so the page waits until the standby has replayed the primary's WAL up to a
 * position read after the session list, and only then reads (pending probe and page) on the standby.
 */
export interface ReadReplica {
  /** The hot standby pages are read from. */
  replica: Queryable;
  /** How long a page may wait for the standby to catch up before ReplicaBehindError. */
  maxWaitMs: number;
  /** Poll interval while waiting (default 5 ms). */
  pollMs?: number;
}

/** The standby did not replay the primary's WAL far enough within maxWaitMs: read from the primary. */
export class ReplicaBehindError extends Error {
  constructor(
    readonly requiredLsn: string,
    readonly replayedLsn: string | null,
  ) {
    super(`read replica has replayed ${replayedLsn ?? "nothing"}, the page needs ${requiredLsn}`);
    this.name = "ReplicaBehindError";
  }
}

/**
 * The primary's WAL insert position: every transaction that had committed before this statement has
 * its commit record before it (insert position, so that it holds with synchronous_commit = off too).
 * The horizon reads it after the session list; the catalog's listing before reading the registry.
 */
export async function primaryWalInsertLsn(primary: Queryable): Promise<string> {
  return (await primary.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn")).rows[0].lsn;
}

/** Waits until `replica` has replayed up to `lsn` (new snapshots there then see those commits). */
export async function awaitReplayed(replica: Queryable, lsn: string, maxWaitMs: number, pollMs = 5): Promise<void> {
  const deadline = Date.now() + maxWaitMs;
  for (;;) {
    const { rows } = await replica.query<{ ok: boolean | null; replayed: string | null }>(
      "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok, pg_last_wal_replay_lsn()::text AS replayed",
      [lsn],
    );
    if (rows[0].ok) return;
    if (rows[0].replayed === null) throw new Error("the read replica is not a standby (pg_last_wal_replay_lsn() is NULL)");
    if (Date.now() >= deadline) throw new ReplicaBehindError(lsn, rows[0].replayed);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * The horizon of one export page of `formId`'s dataset (null: not a form dataset). `db` is the
 * primary; with `readReplica`, the page is to be read from that standby (see ReadReplica).
 */
export async function pageHorizon(db: Queryable, organizationId: string, formId: string | null, readReplica?: ReadReplica): Promise<PageHorizon> {
  const { rows } = await db.query<HorizonRow & { held: boolean | null }>({ ...PAGE_HORIZON_SQL, values: [...params(organizationId), formId] });
  const sessions = sessionHorizon(rows[0]);
  const floor = formId !== null && rows[0].pending !== null ? { pending: rows[0].pending, held: rows[0].held ?? true } : undefined;
  let pageSource = db;
  if (readReplica) {
    await awaitReplayed(readReplica.replica, await primaryWalInsertLsn(db), readReplica.maxWaitMs, readReplica.pollMs);
    pageSource = readReplica.replica;
  }
  const pending =
    formId === null ? undefined : (floor ?? (await pageSource.query<{ pending: string | null; held: boolean }>({ ...PAGE_PENDING_SQL, values: [organizationId, formId] })).rows[0]);
  const pendingSince = opt(pending?.pending ?? null);
  const visibleBeforeMicros = pendingSince !== undefined && pendingSince < sessions.horizonMicros ? pendingSince : sessions.horizonMicros;
  return {
    ...sessions,
    ...(pendingSince !== undefined ? { pendingSince, pendingHeld: pending!.held } : {}),
    visibleBeforeMicros,
  };
}

export interface ListingHorizon extends SessionHorizon {
  /** The pending part per form id: its pending floor, else its oldest unapplied stamp (only forms with either). */
  pendingByForm: Map<string, Micros>;
}

/**
 * The horizon behind one listing's tokens; raises the organization's floor where needed (see above).
 * `pendingByForm` covers `formIds`, or, without them, every form of the organization with a pending
 * floor (migration 090) or a pending change: a listing passes none, since a 10k-element uuid array
 * parameter cost more than the whole skip scan (issue 15) and stamps of forms it does not list are
 * never looked up.
 */
export async function listingHorizon(db: Queryable, organizationId: string, formIds?: readonly string[]): Promise<ListingHorizon> {
  const { rows } = await db.query<HorizonRow>(LISTING_HORIZON_SQL, [...params(organizationId), formIds === undefined ? null : [...new Set(formIds)]]);
  const pending = JSON.parse(rows[0].pending ?? "{}") as Record<string, string>;
  return { ...sessionHorizon(rows[0]), pendingByForm: new Map(Object.entries(pending).map(([form, at]) => [form, BigInt(at)])) };
}

/** Form datasets' source_ref is the form id (grids append their path after a '/'); null otherwise. */
export function formIdOfDataset(dataset: { kind: string; sourceRef: string }): string | null {
  if (dataset.kind !== "submission" && dataset.kind !== "grid") return null;
  return leadingUuid(dataset.sourceRef);
}

/** A dataset's horizon within a listing: the session horizon, lowered to its form's pending stamp. */
export function datasetHorizon(listing: ListingHorizon, dataset: { kind: string; sourceRef: string }): Micros {
  const formId = formIdOfDataset(dataset);
  const pending = formId === null ? undefined : listing.pendingByForm.get(formId);
  return pending !== undefined && pending < listing.horizonMicros ? pending : listing.horizonMicros;
}

/**
 * Whether everything a dataset's change counter has counted is servable under `horizon`: every
 * counted row is stamped at or before `settlesAtMicros` (dataset_changes.settles_at), and a page
 * serves rows stamped strictly before the horizon. A dataset never counted is settled.
 */
export function isSettled(settlesAtMicros: string | undefined, horizon: Micros): boolean {
  return settlesAtMicros === undefined || BigInt(settlesAtMicros) < horizon;
}

/** Seconds each kind of holder keeps (or, readers, would keep) an organization's newest rows back. */
export function holderLagSeconds(h: PageHorizon): Record<VisibilityHorizonHolder, number> {
  const lag = (since: Micros | undefined, floorApplies: boolean) => {
    if (since === undefined) return 0;
    const effective = floorApplies && since < h.horizonMicros ? h.horizonMicros : since;
    return Math.max(0, Number(h.nowMicros - effective) / 1e6);
  };
  return {
    undeclared_writer: lag(h.undeclaredWriterSince, true),
    declared_writer: lag(h.declaredWriterSince, true),
    reader_ignored: lag(h.readerSince, false),
    // A floor raised with nothing holding it only trails the clock since nothing changed: no lag.
    pending_changes: h.pendingHeld === false ? 0 : lag(h.pendingSince, false),
  };
}

/** A Micros value as a timestamptz expression of the bigint text parameter `param`, exactly. */
const timestamptzOfMicros = (param: string) => `(timestamptz 'epoch' + ${param}::bigint * interval '1 microsecond')`;

/**
 * Whether anything keeps the floor `floorExpr` of form `formExpr` (organization $1) behind the
 * present: the raise's own statement time $4 is after it, or rows a dataset of the form counted
 * (dataset_changes.settles_at) are at or after it.
 */
const floorHeld = (floorExpr: string, formExpr: string) => `(${floorExpr} < ${timestamptzOfMicros("$4")} OR EXISTS (
    SELECT 1 FROM dataset_registry r JOIN dataset_changes d ON d.organization_id = r.organization_id AND d.dataset = r.key
     WHERE r.organization_id = $1::uuid AND r.kind IN ('submission', 'grid')
       AND (r.source_ref = ${formExpr}::text OR r.source_ref LIKE ${formExpr}::text || '/%')
       AND d.settles_at >= ${floorExpr}))`;

/** $1 organization, $2 form ids, $3 session horizon (µs), $4 the horizon statement's time (µs). */
const RAISE_FLOORS_SQL = `
WITH computed AS (
  SELECT f.form_id, least(${timestamptzOfMicros("$3")}, coalesce(${pendingOfForm("f.form_id")}, 'infinity')) AS pending_from
    FROM unnest($2::uuid[]) AS f(form_id)
)
INSERT INTO form_dataset_pending_floors AS fl (organization_id, form_id, pending_from, held, raised_at)
SELECT $1::uuid, c.form_id, c.pending_from, ${floorHeld("c.pending_from", "c.form_id")}, clock_timestamp() FROM computed c
ON CONFLICT (organization_id, form_id) DO UPDATE
   SET pending_from = greatest(fl.pending_from, excluded.pending_from),
       held = ${floorHeld("greatest(fl.pending_from, excluded.pending_from)", "fl.form_id")},
       raised_at = excluded.raised_at`;

/**
 * Raises the pending floors of `formIds` (organization `organizationId`) to what their change log
 * shows now (migration 090). Callers hold each form's lock (formLockKeys), so raises of one form never
 * interleave: consumers call it in the transaction that consumed the changes, after the rows are
 * written and counted, so one commit shows rows, consumed changes and floor together.
 *
 * Two statements, as for a page: the session horizon first, then the oldest pending stamp in a
 * snapshot taken after it. Every change that snapshot cannot see is a writer's that held a
 * transaction id when the sessions were read (stamped at or after its xact_start, so not before the
 * session horizon) or took one later (stamped later still), so the floor, the lesser of the two,
 * bounds every change pending now or logged later. It only ever goes up (the greater of the stored
 * and the new floor: both bound every such change), so no page uses less than a listing did.
 * Needs READ COMMITTED (a snapshot per statement).
 */
export async function raisePendingFloors(db: Queryable, organizationId: string, formIds: readonly string[]): Promise<void> {
  if (formIds.length === 0) return;
  const isolation = (await db.query<{ level: string }>("SELECT current_setting('transaction_isolation') AS level")).rows[0].level;
  if (isolation !== "read committed") throw new Error(`raisePendingFloors needs READ COMMITTED (a snapshot per statement), not ${isolation}`);
  const { rows } = await db.query<HorizonRow>({ ...PAGE_HORIZON_SQL, values: [...params(organizationId), null] });
  const sessions = sessionHorizon(rows[0]);
  await db.query(RAISE_FLOORS_SQL, [organizationId.toLowerCase(), [...new Set(formIds.map((f) => f.toLowerCase()))], String(sessions.horizonMicros), String(sessions.nowMicros)]);
}
