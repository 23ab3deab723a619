import type { Pool, PoolClient } from "pg";
import { raisePendingFloors, type CursorCodec } from "@exportsvc/datasets";
import { inTransaction } from "@exportsvc/db";
import { DEFAULT_DROP_GRACE_MS, type BuildStatus } from "./build-types";
import { openHelperClient } from "./materialize";
import { rebuildFormInTransaction } from "./rebuild";
import { dropRetiredTables } from "./retired-tables";
import type { DatasetPlan } from "./derive";
import { insertRenderedRowsSql } from "./render-sql";
import { signingForTable } from "./stored-cursors";
import { bumpDatasetChanges, errorMessage, formLockKeys, isTransient, pinTextForms } from "./sql-helpers";

export interface ApplyOptions {
  /** Change-log rows claimed per transaction (default 500). */
  batchSize?: number;
  /** Only this organization's changes (e.g. to settle one organization before reading it); default all. */
  organizationId?: string;
  /** Only these organizations' changes (tests that must not consume other suites' work); default all. */
  organizationIds?: string[];
  /** Grace of replaced tables before they are dropped (see BuildOptions); default 60 s. */
  dropGraceMs?: number;
  /** Tables of one form rendered at once by a rebuild (see RebuildOptions); default 3. */
  rebuildParallelism?: number;
  /** Told about every rebuild request the pass ran, when it has committed or failed (metrics, logs). */
  onRebuild?: (report: RebuildReport) => void;
  /**
   * Rebuild requests run by this pass before its batch of submission changes (default: up to
   * batchSize). The maintenance loop runs one, so an organization's 500-form publish never holds
   * up another organization's submission changes for more than one rebuild.
   */
  maxRebuilds?: number;
  /**
   * Round-robin position shared by the concurrent workers of one process: each claim takes the
   * organization after the last one served (by organization id, wrapping around) and skips the
   * organizations other workers are busy with. Without it the oldest request goes first (FIFO).
   */
  rotation?: OrganizationRotation;
  /** Drop replaced tables past their grace at the end of the pass (default true). */
  dropRetired?: boolean;
  /** Raise again the pending floors something held back (default true; see raiseHeldPendingFloors). */
  raiseHeldFloors?: boolean;
  /** Signs the rows' stored `_cursor` (see RebuildOptions.cursorCodec); undefined: rows are written without. */
  cursorCodec?: CursorCodec;
}

/**
 * Fairness between organizations for concurrent change consumers: the last organization served and
 * the ones being worked on now. One per maintenance loop; plain state, safe because Node runs one
 * callback at a time.
 */
export class OrganizationRotation {
  private last: string | null = null;
  private readonly busy = new Map<string, number>();

  /** Where the next claim starts (exclusive) and which organizations to skip. */
  position(): { after: string | null; busy: string[] } {
    return { after: this.last, busy: [...this.busy.keys()] };
  }

  /** Marks the organization served and busy until the returned release is called. */
  take(orgId: string): () => void {
    this.last = orgId;
    this.busy.set(orgId, (this.busy.get(orgId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.busy.get(orgId) ?? 1) - 1;
      if (n <= 0) this.busy.delete(orgId);
      else this.busy.set(orgId, n);
    };
  }
}

/** One rebuild request as the consumer ran it. */
export interface RebuildReport {
  organizationId: string;
  formId: string;
  /** The build's status, or "error" when the rebuild threw (a transient database failure; the request stays queued). */
  status: BuildStatus | "error";
  /** From claiming the request to the commit (or the failure). */
  durationSeconds: number;
  error?: string;
}

export interface ApplyResult {
  /** Change-log rows consumed (applied, or discarded because the dataset does not take changes). */
  consumed: number;
  /** Submissions re-rendered. */
  submissions: number;
  /** Form rebuilds run (publish, rename, time zone fixed). */
  rebuilds: number;
  /** Forms whose datasets were marked failed while applying changes. */
  failedForms: number;
  /** Change-log rows left for later because another worker holds their form. */
  deferred: number;
  /** Replaced tables dropped after their grace. */
  droppedTables: number;
  /** Held pending floors raised again (forms whose floor something kept back when it was last raised). */
  raisedFloors: number;
}

/** The organizations a consumer is limited to (null: all), from its options. */
export const organizationFilter = (opts: { organizationId?: string; organizationIds?: string[] }): string[] | null =>
  opts.organizationIds ?? (opts.organizationId ? [opts.organizationId] : null);

export const emptyApplyResult = (): ApplyResult => ({ consumed: 0, submissions: 0, rebuilds: 0, failedForms: 0, deferred: 0, droppedTables: 0, raisedFloors: 0 });

/**
 * Raises again the pending floors something held back when they were last raised (an open writer,
 * changes still pending, rows counted at or after the floor), oldest first, at most `limit`: without
 * it, a form whose last consumer ran beside an open writer would keep its newest rows back until
 * its next change. A form another worker holds is skipped (that worker raises it as it commits).
 */
export async function raiseHeldPendingFloors(pool: Pool, orgFilter: string[] | null, limit: number): Promise<number> {
  // Answered by the partial index form_dataset_pending_floors_held; nothing held, no transaction.
  const held = await pool.query<{ organization_id: string; form_id: string }>(
    `SELECT organization_id, form_id FROM form_dataset_pending_floors
      WHERE held AND ($1::uuid[] IS NULL OR organization_id = ANY($1::uuid[]))
      ORDER BY raised_at LIMIT $2`,
    [orgFilter, limit],
  );
  if (held.rowCount === 0) return 0;
  return inTransaction(pool, async (client) => {
    const byOrganization = new Map<string, string[]>();
    for (const { organization_id: orgId, form_id: formId } of held.rows) {
      const [k1, k2] = formLockKeys(orgId, formId);
      const locked = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1, $2) AS ok", [k1, k2]);
      if (locked.rows[0].ok) byOrganization.set(orgId, [...(byOrganization.get(orgId) ?? []), formId]);
    }
    for (const [orgId, forms] of byOrganization) await raisePendingFloors(client, orgId, forms);
    return [...byOrganization.values()].reduce((n, forms) => n + forms.length, 0);
  });
}

/**
 * Consumes the change log once: pending rebuild requests first (each in its own transaction), then
 * one batch of submission changes. Idempotent (a change re-renders the submission from the source)
 * and safe with concurrent consumers: rows are claimed with FOR UPDATE SKIP LOCKED and a form's
 * writers are serialized by an advisory lock that rebuilds share.
 */
export async function applyPendingChanges(pool: Pool, opts: ApplyOptions = {}): Promise<ApplyResult> {
  const batchSize = opts.batchSize ?? 500;
  const result = emptyApplyResult();
  const maxRebuilds = opts.maxRebuilds ?? batchSize;
  const orgFilter = organizationFilter(opts);
  for (let i = 0; i < maxRebuilds; i++) {
    const rebuilt = await runOneRebuildRequest(pool, orgFilter, result, opts);
    if (!rebuilt) break;
  }
  await applySubmissionChanges(pool, batchSize, orgFilter, result, opts);
  if (opts.raiseHeldFloors !== false) result.raisedFloors = await raiseHeldPendingFloors(pool, orgFilter, batchSize);
  if (opts.dropRetired === false) return result;
  const client = await pool.connect();
  try {
    result.droppedTables = await dropRetiredTables(client, { graceMs: opts.dropGraceMs ?? DEFAULT_DROP_GRACE_MS, organizationId: opts.organizationId });
  } finally {
    client.release();
  }
  return result;
}

/**
 * Age in seconds of the oldest change not yet consumed (submission changes and rebuild requests,
 * including those a running rebuild holds), by the database's clock; 0 when the log is empty.
 */
export async function maintenanceLagSeconds(pool: Pool, organizationId?: string): Promise<number> {
  const { rows } = await pool.query<{ lag: number | null }>(
    `SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 AS lag FROM form_dataset_changes
      WHERE ($1::uuid IS NULL OR organization_id = $1) ORDER BY seq LIMIT 1`,
    [organizationId ?? null],
  );
  return Math.max(0, rows[0]?.lag ?? 0);
}

async function runOneRebuildRequest(
  pool: Pool,
  orgFilter: string[] | null,
  result: ApplyResult,
  opts: Pick<ApplyOptions, "rebuildParallelism" | "onRebuild" | "rotation" | "cursorCodec">,
): Promise<boolean> {
  const { onRebuild, rotation } = opts;
  let started = process.hrtime.bigint();
  const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
  let claimedForm: { organizationId: string; formId: string } | undefined;
  let release = () => undefined as void;
  try {
    const rebuilt = await inTransaction(pool, async (client) => {
      // The rebuild's own time, not the wait for a connection.
      started = process.hrtime.bigint();
      const claimed = rotation
        ? await claimInRotation<{ organization_id: string; form_id: string }>(client, rotation, (after, busy) => ({
            // form_dataset_changes_rebuilds (organization_id, seq) WHERE kind = 'rebuild' answers this.
            text: `SELECT organization_id, form_id FROM form_dataset_changes
                    WHERE kind = 'rebuild' AND ($1::uuid[] IS NULL OR organization_id = ANY($1::uuid[])) AND organization_id ${after.op} $2::uuid
                      AND organization_id <> ALL($3::uuid[])
                    ORDER BY organization_id, seq LIMIT 1 FOR UPDATE SKIP LOCKED`,
            values: [orgFilter, after.value, busy],
          }))
        : await client.query<{ organization_id: string; form_id: string }>(
            `SELECT organization_id, form_id FROM form_dataset_changes WHERE kind = 'rebuild' AND ($1::uuid[] IS NULL OR organization_id = ANY($1::uuid[]))
              ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`,
            [orgFilter],
          );
      if (claimed.rowCount === 0) return null;
      const { organization_id: orgId, form_id: formId } = claimed.rows[0];
      claimedForm = { organizationId: orgId, formId };
      if (rotation) release = rotation.take(orgId);
      // Every pending request for the same form is satisfied by this one rebuild.
      const same = await client.query(
        `DELETE FROM form_dataset_changes WHERE seq IN (
           SELECT seq FROM form_dataset_changes
            WHERE organization_id = $1 AND form_id = $2 AND kind = 'rebuild' FOR UPDATE SKIP LOCKED)`,
        [orgId, formId],
      );
      const outcome = await rebuildFormInTransaction(client, orgId, formId, {
        parallelism: opts.rebuildParallelism,
        openHelper: () => openHelperClient(pool),
        cursorCodec: opts.cursorCodec,
      });
      return { consumed: same.rowCount ?? 0, form: claimedForm, outcome };
    });
    if (!rebuilt) return false;
    result.consumed += rebuilt.consumed;
    result.rebuilds += 1;
    if (rebuilt.outcome.result.status === "failed") result.failedForms += 1;
    onRebuild?.({ ...rebuilt.form, status: rebuilt.outcome.result.status, durationSeconds: seconds(), error: rebuilt.outcome.result.error });
    return true;
  } catch (err) {
    if (claimedForm) onRebuild?.({ ...claimedForm, status: "error", durationSeconds: seconds(), error: errorMessage(err) });
    throw err;
  } finally {
    release();
  }
}

/**
 * Runs a claim for the organization after the rotation's last one (by id), wrapping around to the
 * start when no later organization has work: round-robin over the organizations with pending work.
 */
async function claimInRotation<R extends { organization_id: string }>(
  client: PoolClient,
  rotation: OrganizationRotation,
  query: (after: { op: ">" | ">="; value: string }, busy: string[]) => { text: string; values: unknown[] },
): Promise<{ rowCount: number | null; rows: R[] }> {
  const { after, busy } = rotation.position();
  const MIN_UUID = "00000000-0000-0000-0000-000000000000";
  if (after !== null) {
    const later = await client.query<R>(query({ op: ">", value: after }, busy));
    if (later.rowCount) return later;
  }
  return client.query<R>(query({ op: ">=", value: MIN_UUID }, busy));
}

interface ClaimedChange {
  seq: string;
  organization_id: string;
  form_id: string;
  submission_id: string;
}

async function applySubmissionChanges(
  pool: Pool,
  batchSize: number,
  orgFilter: string[] | null,
  result: ApplyResult,
  opts: Pick<ApplyOptions, "rotation" | "cursorCodec">,
): Promise<void> {
  const { rotation } = opts;
  let release = () => undefined as void;
  try {
    const consumed = await inTransaction(pool, async (client) => {
      await pinTextForms(client);
      // With a rotation, a batch holds one organization's changes (the next organization in turn), so
      // a bulk import of one organization is consumed between the others', not before them.
      const claimed = rotation
        ? await claimInRotation<ClaimedChange>(client, rotation, (after, busy) => ({
            text: `SELECT seq, organization_id, form_id, submission_id FROM form_dataset_changes
                    WHERE organization_id = (
                      SELECT organization_id FROM form_dataset_changes
                       WHERE kind = 'submission' AND ($2::uuid[] IS NULL OR organization_id = ANY($2::uuid[])) AND organization_id ${after.op} $3::uuid
                         AND organization_id <> ALL($4::uuid[])
                       ORDER BY organization_id, seq LIMIT 1)
                      AND kind = 'submission'
                    ORDER BY organization_id, seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
            values: [batchSize, orgFilter, after.value, busy],
          }))
        : await client.query<ClaimedChange>(
            `SELECT seq, organization_id, form_id, submission_id FROM form_dataset_changes
              WHERE kind = 'submission' AND ($2::uuid[] IS NULL OR organization_id = ANY($2::uuid[]))
              ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
            [batchSize, orgFilter],
          );
      if (rotation && claimed.rows.length > 0) release = rotation.take(claimed.rows[0].organization_id);
      const groups = new Map<string, ClaimedChange[]>();
      for (const c of claimed.rows) {
        const k = `${c.organization_id}/${c.form_id}`;
        groups.set(k, [...(groups.get(k) ?? []), c]);
      }
      const consumedSeqs: string[] = [];
      const consumedSeqSet = new Set<string>();
      const consumedForms = new Map<string, Set<string>>();
      // A fixed lock order keeps concurrent consumers from deadlocking on each other's forms.
      for (const key of [...groups.keys()].sort()) {
        const changes = groups.get(key)!;
        const { organization_id: orgId, form_id: formId } = changes[0];
        const [k1, k2] = formLockKeys(orgId, formId);
        const locked = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1, $2) AS ok", [k1, k2]);
        if (!locked.rows[0].ok) {
          // A rebuild or another consumer holds the form; these rows stay for the next round.
          result.deferred += changes.length;
          continue;
        }
        await applyFormChanges(client, orgId, formId, changes, result, opts.cursorCodec);
        consumedSeqs.push(...changes.map((c) => c.seq));
        consumedForms.set(orgId, (consumedForms.get(orgId) ?? new Set<string>()).add(formId));
        for (const c of changes) consumedSeqSet.add(c.seq);
      }
      // One statement per organization, each keyed by it (routed to one node on a distributed database).
      const consumedByOrganization = new Map<string, string[]>();
      for (const c of claimed.rows) {
        if (consumedSeqSet.has(c.seq)) consumedByOrganization.set(c.organization_id, [...(consumedByOrganization.get(c.organization_id) ?? []), c.seq]);
      }
      for (const [orgId, seqs] of consumedByOrganization) {
        await client.query("DELETE FROM form_dataset_changes WHERE organization_id = $1 AND seq = ANY($2::bigint[])", [orgId, seqs]);
      }
      // Last, under the forms' locks: the floors pages read instead of the change log (one commit
      // shows the rows, the consumed changes and the raised floors together).
      for (const [orgId, forms] of consumedForms) await raisePendingFloors(client, orgId, [...forms]);
      return consumedSeqs.length;
    });
    result.consumed += consumed;
  } finally {
    release();
  }
}

/**
 * The submissions of the claimed changes that the writer logged before the form's deletion: the
 * change's clock (created_at, taken in the writer's statement) against deleted_at, both the
 * database's, compared in the database at full precision.
 */
async function changedBeforeDeletion(client: PoolClient, orgId: string, formId: string, changes: readonly ClaimedChange[]): Promise<string[]> {
  const { rows } = await client.query<{ submission_id: string }>(
    `SELECT DISTINCT c.submission_id FROM form_dataset_changes c
       JOIN forms f ON f.organization_id = c.organization_id AND f.id = c.form_id
      WHERE c.organization_id = $1 AND c.form_id = $2 AND c.seq = ANY($3::bigint[]) AND c.created_at <= f.deleted_at`,
    [orgId, formId, changes.map((c) => c.seq)],
  );
  return rows.map((r) => r.submission_id);
}

interface LiveDataset {
  key: string;
  state: string;
  table_name: string | null;
  plan: DatasetPlan | null;
  cursor_signature: string | null;
}

/**
 * Re-renders the submissions' rows in every dataset of the form (delete + insert per submission,
 * so grid rows are renumbered from 1). Failed or unbuilt datasets wait for a rebuild, which renders
 * everything from the source anyway.
 *
 * A deleted form's datasets keep what the form held when it was deleted and never change after
 * (docs/contract.md): changes written before the deletion are still applied, however late this
 * consumer gets to them (a busy or restarted schema service), and changes written after it are
 * discarded. A form whose row is gone altogether is left as it is.
 */
async function applyFormChanges(
  client: PoolClient,
  orgId: string,
  formId: string,
  changes: readonly ClaimedChange[],
  result: ApplyResult,
  cursorCodec: CursorCodec | undefined,
): Promise<void> {
  const form = await client.query<{ deleted: boolean }>("SELECT deleted_at IS NOT NULL AS deleted FROM forms WHERE organization_id = $1 AND id = $2", [
    orgId,
    formId,
  ]);
  if (form.rowCount === 0) return;
  const submissionIds = form.rows[0].deleted
    ? await changedBeforeDeletion(client, orgId, formId, changes)
    : [...new Set(changes.map((c) => c.submission_id))];
  if (submissionIds.length === 0) return;
  const datasets = await client.query<LiveDataset>(
    `SELECT r.key, r.state, r.table_name, t.plan, t.cursor_signature
       FROM dataset_registry r
       LEFT JOIN form_ds.dataset_tables t ON t.organization_id = r.organization_id AND t.table_name = r.table_name
      WHERE r.organization_id = $1 AND r.kind IN ('submission', 'grid') AND (r.source_ref = $2 OR r.source_ref LIKE $2 || '/%')
        AND r.state <> 'retired'`,
    [orgId, formId],
  );
  if (datasets.rowCount === 0 || datasets.rows.some((d) => d.state !== "ready" || !d.table_name || !d.plan)) return;

  await client.query("SAVEPOINT form_changes");
  try {
    const moved: string[] = [];
    for (const d of datasets.rows) {
      const table = d.table_name!;
      const deleted = await client.query(`DELETE FROM ${table} WHERE organization_id = $1 AND id = ANY($2::uuid[])`, [orgId, submissionIds]);
      const signing = signingForTable(cursorCodec, d.cursor_signature, orgId, d.plan!);
      const inserted = await client.query(insertRenderedRowsSql(table, d.plan!, { onlySubmissions: true, signing }), [orgId, formId, submissionIds]);
      if ((deleted.rowCount ?? 0) + (inserted.rowCount ?? 0) > 0) moved.push(d.key);
    }
    const newest = await client.query<{ stamp: string | null }>(
      "SELECT max(last_modified)::text AS stamp FROM submissions WHERE organization_id = $1 AND id = ANY($2::uuid[])",
      [orgId, submissionIds],
    );
    await bumpDatasetChanges(client, orgId, moved, newest.rows[0].stamp);
    await client.query("RELEASE SAVEPOINT form_changes");
    result.submissions += submissionIds.length;
  } catch (err) {
    if (isTransient(err)) throw err;
    await client.query("ROLLBACK TO SAVEPOINT form_changes");
    // The tables no longer follow the source: say so (export answers 503) until a rebuild succeeds.
    await client.query(
      `UPDATE dataset_registry SET state = 'failed', error = $3, updated_at = clock_timestamp()
        WHERE organization_id = $1 AND key = ANY($2::text[])`,
      [orgId, datasets.rows.map((d) => d.key), `applying submission changes failed: ${errorMessage(err)}`],
    );
    result.failedForms += 1;
  }
}
