import type { Pool, PoolClient } from "pg";
import { DEFAULT_DROP_GRACE_MS, dropRetiredTables, openHelperClient, rebuildFormInTransaction } from "./build";
import type { DatasetPlan } from "./derive";
import { renderRowsSql, tableColumnNames } from "./render-sql";
import { bumpDatasetChanges, errorMessage, formLockKeys, isTransient, pinTextForms } from "./sql-helpers";

export interface ApplyOptions {
  /** Change-log rows claimed per transaction (default 500). */
  batchSize?: number;
  /** Only this organization's changes (e.g. to settle one organization before reading it); default all. */
  organizationId?: string;
  /** Grace of replaced tables before they are dropped (see BuildOptions); default 60 s. */
  dropGraceMs?: number;
  /** Tables of one form rendered at once by a rebuild (see RebuildOptions); default 3. */
  rebuildParallelism?: number;
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
}

const emptyResult = (): ApplyResult => ({ consumed: 0, submissions: 0, rebuilds: 0, failedForms: 0, deferred: 0, droppedTables: 0 });

/**
 * Consumes the change log once: pending rebuild requests first (each in its own transaction), then
 * one batch of submission changes. Idempotent (a change re-renders the submission from the source)
 * and safe with concurrent consumers: rows are claimed with FOR UPDATE SKIP LOCKED and a form's
 * writers are serialized by an advisory lock that rebuilds share.
 */
export async function applyPendingChanges(pool: Pool, opts: ApplyOptions = {}): Promise<ApplyResult> {
  const batchSize = opts.batchSize ?? 500;
  const result = emptyResult();
  for (let i = 0; i < batchSize; i++) {
    const rebuilt = await runOneRebuildRequest(pool, opts.organizationId ?? null, result, opts.rebuildParallelism);
    if (!rebuilt) break;
  }
  await applySubmissionChanges(pool, batchSize, opts.organizationId ?? null, result);
  const client = await pool.connect();
  try {
    result.droppedTables = await dropRetiredTables(client, { graceMs: opts.dropGraceMs ?? DEFAULT_DROP_GRACE_MS, organizationId: opts.organizationId });
  } finally {
    client.release();
  }
  return result;
}

async function runOneRebuildRequest(pool: Pool, orgFilter: string | null, result: ApplyResult, parallelism?: number): Promise<boolean> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const claimed = await client.query<{ organization_id: string; form_id: string }>(
      `SELECT organization_id, form_id FROM form_dataset_changes WHERE kind = 'rebuild' AND ($1::uuid IS NULL OR organization_id = $1)
        ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`,
      [orgFilter],
    );
    if (claimed.rowCount === 0) {
      await client.query("COMMIT");
      return false;
    }
    const { organization_id: orgId, form_id: formId } = claimed.rows[0];
    // Every pending request for the same form is satisfied by this one rebuild.
    const same = await client.query(
      `DELETE FROM form_dataset_changes WHERE seq IN (
         SELECT seq FROM form_dataset_changes
          WHERE organization_id = $1 AND form_id = $2 AND kind = 'rebuild' FOR UPDATE SKIP LOCKED)`,
      [orgId, formId],
    );
    const outcome = await rebuildFormInTransaction(client, orgId, formId, { parallelism, openHelper: () => openHelperClient(pool) });
    await client.query("COMMIT");
    result.consumed += same.rowCount ?? 0;
    result.rebuilds += 1;
    if (outcome.result.status === "failed") result.failedForms += 1;
    return true;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

interface ClaimedChange {
  seq: string;
  organization_id: string;
  form_id: string;
  submission_id: string;
}

async function applySubmissionChanges(pool: Pool, batchSize: number, orgFilter: string | null, result: ApplyResult): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await pinTextForms(client);
    const claimed = await client.query<ClaimedChange>(
      `SELECT seq, organization_id, form_id, submission_id FROM form_dataset_changes
        WHERE kind = 'submission' AND ($2::uuid IS NULL OR organization_id = $2)
        ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [batchSize, orgFilter],
    );
    const groups = new Map<string, ClaimedChange[]>();
    for (const c of claimed.rows) {
      const k = `${c.organization_id}/${c.form_id}`;
      groups.set(k, [...(groups.get(k) ?? []), c]);
    }
    const consumedSeqs: string[] = [];
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
      const submissionIds = [...new Set(changes.map((c) => c.submission_id))];
      await applyFormChanges(client, orgId, formId, submissionIds, result);
      consumedSeqs.push(...changes.map((c) => c.seq));
    }
    if (consumedSeqs.length > 0) {
      await client.query("DELETE FROM form_dataset_changes WHERE seq = ANY($1::bigint[])", [consumedSeqs]);
    }
    await client.query("COMMIT");
    result.consumed += consumedSeqs.length;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

interface LiveDataset {
  key: string;
  state: string;
  table_name: string | null;
  plan: DatasetPlan | null;
}

/**
 * Re-renders the submissions' rows in every dataset of the form (delete + insert per submission,
 * so grid rows are renumbered from 1). Deleted forms are frozen; failed or unbuilt datasets wait for
 * a rebuild, which renders everything from the source anyway.
 */
async function applyFormChanges(client: PoolClient, orgId: string, formId: string, submissionIds: string[], result: ApplyResult): Promise<void> {
  const form = await client.query<{ deleted: boolean }>("SELECT deleted_at IS NOT NULL AS deleted FROM forms WHERE organization_id = $1 AND id = $2", [
    orgId,
    formId,
  ]);
  if (form.rowCount === 0 || form.rows[0].deleted) return;
  const datasets = await client.query<LiveDataset>(
    `SELECT r.key, r.state, r.table_name, t.plan
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
      const inserted = await client.query(
        `INSERT INTO ${table} (${tableColumnNames(d.plan!).join(", ")})\n${renderRowsSql(d.plan!, { onlySubmissions: true })}`,
        [orgId, formId, submissionIds],
      );
      if ((deleted.rowCount ?? 0) + (inserted.rowCount ?? 0) > 0) moved.push(d.key);
    }
    await bumpDatasetChanges(client, orgId, moved);
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
