import { Client, escapeLiteral, type Pool, type PoolClient } from "pg";
import { deriveFormDatasets, fieldIdsWithColumns, type DatasetPlan, type PreviousDataset } from "./derive";
import { mergeRetainedFields, parseFieldTree } from "./fields";
import { createIndexesSql, createTableSql, isDataException, renderRowsSql, tableColumnNames, type Conversions } from "./render-sql";
import { bumpDatasetChanges, errorMessage, formLockKeys, isTransient, materializedTableName, organizationKeysLockKeys, pinTextForms } from "./sql-helpers";

export type BuildStatus =
  /** Every dataset of the form was rebuilt and swapped in. */
  | "built"
  /** The rebuild failed; the previous tables still hold their data, the registry rows are `failed`. */
  | "failed"
  /** The form is deleted: its datasets stay exactly as they are. */
  | "frozen"
  /** The form has no published version yet: nothing to build. */
  | "unpublished"
  /** No such form in this organization. */
  | "missing";

export interface BuildResult {
  status: BuildStatus;
  /** Dataset keys of the form after the build (submission first), when built or failed. */
  datasets: string[];
  /** Keys retired by this build (form or grid renamed). */
  retired: string[];
  error?: string;
}

interface RegistryRow extends PreviousDataset {
  tableName: string | null;
}

export interface BuildOptions {
  /**
   * How long a replaced table outlives the swap before it is dropped (default 60 s): an export that
   * resolved the old table just before the swap still reads it. Tables past their grace are dropped
   * by any later build or maintenance pass.
   */
  dropGraceMs?: number;
}

export interface RebuildOptions {
  /**
   * How many of the form's tables are rendered at once (default 3, at most the number of tables): the rebuild's own connection
   * plus `parallelism - 1` helper connections opened for the rebuild (not taken from the pool, so
   * a busy pool cannot deadlock it). 1 renders every table in the rebuild's transaction.
   */
  parallelism?: number;
  /** Opens a helper connection (default: a new client with the pool's settings). */
  openHelper?: () => Promise<Client>;
}

export const DEFAULT_DROP_GRACE_MS = 60_000;
export const DEFAULT_REBUILD_PARALLELISM = 3;

/**
 * Rebuilds every dataset of a form beside the live tables and swaps the registry rows in one
 * transaction; the old tables are dropped after the commit (after a grace period). A rebuild replaces
 * the datasets whole or leaves them untouched; a failure (for example a site with a blank time zone)
 * marks the form's registry rows `failed` and keeps the previous tables. Transient database failures
 * are thrown.
 */
export async function buildDataset(pool: Pool, orgId: string, formId: string, opts: BuildOptions & RebuildOptions = {}): Promise<BuildResult> {
  const client = await pool.connect();
  let outcome: { result: BuildResult };
  try {
    await client.query("BEGIN");
    outcome = await rebuildFormInTransaction(client, orgId, formId, { openHelper: () => openHelperClient(pool), ...opts });
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    client.release();
    throw err;
  }
  try {
    await dropRetiredTables(client, { graceMs: opts.dropGraceMs ?? DEFAULT_DROP_GRACE_MS, organizationId: orgId });
  } finally {
    client.release();
  }
  return outcome.result;
}

/**
 * Drops replaced tables whose grace has passed, each in its own short transaction. A table still
 * read by a long export is skipped (lock timeout) and retried on a later pass, so maintenance never
 * queues behind an export.
 */
export async function dropRetiredTables(client: PoolClient, opts: { graceMs: number; organizationId?: string }): Promise<number> {
  const due = await client.query<{ organization_id: string; table_name: string }>(
    `SELECT organization_id, table_name FROM form_ds.dataset_tables
      WHERE retired_at IS NOT NULL AND retired_at <= clock_timestamp() - make_interval(secs => $1::double precision / 1000)
        AND ($2::uuid IS NULL OR organization_id = $2)
      ORDER BY retired_at LIMIT 100`,
    [opts.graceMs, opts.organizationId ?? null],
  );
  let dropped = await dropOrphanedStagedTables(client, opts.organizationId);
  for (const t of due.rows) {
    try {
      await client.query("BEGIN");
      await client.query("SET LOCAL lock_timeout = '200ms'");
      await client.query(`DROP TABLE IF EXISTS ${t.table_name}`);
      await client.query("DELETE FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2", [t.organization_id, t.table_name]);
      await client.query("COMMIT");
      dropped++;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => undefined);
      if (isTransient(err) && (err as { code?: string }).code !== "55P03") throw err;
    }
  }
  return dropped;
}

/**
 * Drops staged tables whose rebuild ended without adopting them (it failed, was rolled back or its
 * process died). A rebuild holds its form's lock until it commits, so a staged table whose form lock
 * can be taken belongs to no running rebuild.
 */
async function dropOrphanedStagedTables(client: PoolClient, organizationId?: string): Promise<number> {
  const staged = await client.query<{ organization_id: string; table_name: string; form_id: string }>(
    `SELECT organization_id, table_name, form_id FROM form_ds.dataset_tables
      WHERE staged AND ($1::uuid IS NULL OR organization_id = $1) ORDER BY created_at LIMIT 100`,
    [organizationId ?? null],
  );
  let dropped = 0;
  for (const t of staged.rows) {
    try {
      await client.query("BEGIN");
      await client.query("SET LOCAL lock_timeout = '200ms'");
      const [k1, k2] = formLockKeys(t.organization_id, t.form_id);
      const free = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_xact_lock($1, $2) AS locked", [k1, k2]);
      const still = free.rows[0].locked
        ? await client.query("SELECT 1 FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2 AND staged FOR UPDATE", [t.organization_id, t.table_name])
        : { rowCount: 0 };
      if (still.rowCount) {
        await client.query(`DROP TABLE IF EXISTS ${t.table_name}`);
        await client.query("DELETE FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2", [t.organization_id, t.table_name]);
        dropped++;
      }
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK").catch(() => undefined);
      if (isTransient(err) && (err as { code?: string }).code !== "55P03") throw err;
    }
  }
  return dropped;
}

/** A connection outside the pool with the pool's settings, for one rebuild's helper work. */
export async function openHelperClient(pool: Pool): Promise<Client> {
  const client = new Client({ ...pool.options, application_name: pool.options.application_name ?? "form-rebuild" });
  // A helper that loses its connection fails its query; the rebuild reports that, not the process.
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

/**
 * The rebuild inside the caller's open transaction (used by buildDataset and by the change consumer,
 * which deletes its rebuild request in the same transaction). Replaced tables are marked retired in
 * the same transaction and dropped later by dropRetiredTables.
 */
export async function rebuildFormInTransaction(
  client: PoolClient,
  orgId: string,
  formId: string,
  opts: RebuildOptions = {},
): Promise<{ result: BuildResult }> {
  await pinTextForms(client);
  const [k1, k2] = formLockKeys(orgId, formId);
  await client.query("SELECT pg_advisory_xact_lock($1, $2)", [k1, k2]);

  const nothing = (status: BuildStatus) => ({ result: { status, datasets: [], retired: [] } });
  const form = await client.query<{ name: string; deleted: boolean }>(
    "SELECT name, deleted_at IS NOT NULL AS deleted FROM forms WHERE organization_id = $1 AND id = $2",
    [orgId, formId],
  );
  if (form.rowCount === 0) return nothing("missing");
  if (form.rows[0].deleted) return nothing("frozen");
  const versions = await client.query<{ fields: unknown }>(
    "SELECT fields FROM form_versions WHERE organization_id = $1 AND form_id = $2 AND published_at IS NOT NULL ORDER BY version DESC",
    [orgId, formId],
  );
  if (versions.rowCount === 0) return nothing("unpublished");

  // Lock order everywhere: form, then organization keys (consumers never take the latter).
  const [o1, o2] = organizationKeysLockKeys(orgId);
  await client.query("SELECT pg_advisory_xact_lock($1, $2)", [o1, o2]);
  const previous = await loadFormRegistryRows(client, orgId, formId);
  const taken = await client.query<{ key: string }>("SELECT key FROM dataset_registry WHERE organization_id = $1", [orgId]);
  const [current, ...older] = versions.rows.map((v) => parseFieldTree(v.fields));
  const fields = mergeRetainedFields(current, older, fieldIdsWithColumns(previous));
  const plans = deriveFormDatasets({
    formId,
    formName: form.rows[0].name,
    fields,
    previous,
    takenKeys: taken.rows.map((r) => r.key),
  });
  const generation = Math.max(0, ...previous.map((p) => p.generation)) + 1;

  const changesSeen = await submissionChangesSeen(client, orgId, formId);
  const parallelism = Math.max(1, Math.min(opts.parallelism ?? DEFAULT_REBUILD_PARALLELISM, plans.length));
  const openHelper = opts.openHelper;
  // Helpers read the source as this transaction sees it (taken before any savepoint: PostgreSQL
  // exports no snapshot from a subtransaction), so every table of the form shows the same moment.
  const snapshot =
    parallelism > 1 && openHelper ? (await client.query<{ s: string }>("SELECT pg_export_snapshot() AS s")).rows[0].s : null;
  const staged: string[] = [];
  await client.query("SAVEPOINT form_rebuild");
  try {
    await assertSiteTimeZones(client, orgId, formId);
    const tables = new Map(plans.map((plan) => [plan.key, materializedTableName(orgId, plan.sourceRef, generation)] as const));
    if (snapshot && openHelper) {
      await materializeInParallel({ client, orgId, formId, plans, tables, parallelism, openHelper, snapshot, staged });
    } else {
      for (const plan of plans) await materialize(client, orgId, formId, plan, tables.get(plan.key)!, { staged: false });
    }
    const retired = await swapRegistry(client, orgId, plans, previous, tables, generation);
    if (staged.length > 0) {
      await client.query("UPDATE form_ds.dataset_tables SET staged = false WHERE organization_id = $1 AND table_name = ANY($2::text[])", [orgId, staged]);
    }
    await consumeSubmissionChanges(client, orgId, changesSeen);
    await client.query("RELEASE SAVEPOINT form_rebuild");
    const live = new Set(tables.values());
    const replaced = previous.map((p) => p.tableName).filter((t): t is string => t !== null && !live.has(t));
    await client.query(
      "UPDATE form_ds.dataset_tables SET retired_at = clock_timestamp() WHERE organization_id = $1 AND table_name = ANY($2::text[])",
      [orgId, replaced],
    );
    return { result: { status: "built", datasets: plans.map((p) => p.key), retired } };
  } catch (err) {
    // Staged tables the helpers committed are dropped by the cleanup pass once this transaction ends.
    if (isTransient(err)) throw err;
    await client.query("ROLLBACK TO SAVEPOINT form_rebuild");
    const message = errorMessage(err);
    const keys = await markFormFailed(client, orgId, message, previous, plans, generation);
    return { result: { status: "failed", datasets: keys, retired: [], error: message } };
  }
}

/** More remembered changes than this are left to the consumer (re-rendered harmlessly) rather than held in memory. */
const MAX_CHANGES_CONSUMED_BY_REBUILD = 100_000;

/**
 * The form's submission changes already committed when the rebuild starts: every table it renders
 * reads a snapshot at least this new (helpers' exported snapshot is taken after this statement), so
 * the new tables already hold them. Consumed with the swap, they would otherwise be re-rendered into
 * identical rows right after the build and move the changeToken a second time for nothing.
 */
async function submissionChangesSeen(client: PoolClient, orgId: string, formId: string): Promise<string[]> {
  const seen = await client.query<{ seq: string }>(
    "SELECT seq FROM form_dataset_changes WHERE organization_id = $1 AND form_id = $2 AND kind = 'submission' LIMIT $3",
    [orgId, formId, MAX_CHANGES_CONSUMED_BY_REBUILD + 1],
  );
  return seen.rows.length > MAX_CHANGES_CONSUMED_BY_REBUILD ? [] : seen.rows.map((r) => r.seq);
}

/** Deletes the remembered changes; rows a consumer holds right now are left to it (it re-renders them harmlessly). */
async function consumeSubmissionChanges(client: PoolClient, orgId: string, seqs: string[]): Promise<void> {
  if (seqs.length === 0) return;
  await client.query(
    `DELETE FROM form_dataset_changes WHERE organization_id = $1 AND seq IN (
       SELECT seq FROM form_dataset_changes WHERE organization_id = $1 AND seq = ANY($2::bigint[]) FOR UPDATE SKIP LOCKED)`,
    [orgId, seqs],
  );
}

export async function loadFormRegistryRows(client: PoolClient, orgId: string, formId: string): Promise<RegistryRow[]> {
  const rows = await client.query(
    `SELECT key, source_ref, state, name_assignments, generation, table_name
       FROM dataset_registry
      WHERE organization_id = $1 AND kind IN ('submission', 'grid') AND (source_ref = $2 OR source_ref LIKE $2 || '/%')
      FOR UPDATE`,
    [orgId, formId],
  );
  return rows.rows.map((r) => ({
    key: r.key,
    sourceRef: r.source_ref,
    state: r.state,
    nameAssignments: r.name_assignments ?? {},
    generation: r.generation,
    tableName: r.table_name,
  }));
}

/** A blank zone would silently shift every `_local` column; the spec makes it block the rebuild. */
async function assertSiteTimeZones(client: PoolClient, orgId: string, formId: string): Promise<void> {
  const blank = await client.query<{ id: string; name: string }>(
    `SELECT st.id, st.name FROM sites st
      WHERE st.organization_id = $1 AND btrim(st.time_zone) = ''
        AND EXISTS (SELECT 1 FROM submissions s WHERE s.organization_id = $1 AND s.form_id = $2 AND s.site_id = st.id)
      ORDER BY st.name LIMIT 1`,
    [orgId, formId],
  );
  if (blank.rowCount) {
    const site = blank.rows[0];
    throw new Error(`site '${site.name}' (${site.id}) has a blank time zone; set it and republish the form`);
  }
}

interface ParallelRender {
  client: PoolClient;
  orgId: string;
  formId: string;
  plans: DatasetPlan[];
  tables: Map<string, string>;
  parallelism: number;
  openHelper: () => Promise<Client>;
  snapshot: string;
  /** Filled with the tables helpers committed (staged until the swap adopts them). */
  staged: string[];
}

/**
 * Renders the form's tables on the rebuild's own connection and `parallelism - 1` helpers at once,
 * each taking the next table from one queue (submission dataset first: usually the widest). A
 * helper works in one REPEATABLE READ transaction on the rebuild's snapshot and commits its tables
 * as staged; a helper that cannot connect leaves its share to the others. Waits for every worker before reporting the first failure (a transient one first, so
 * the rebuild is retried rather than marked failed).
 */
async function materializeInParallel(job: ParallelRender): Promise<void> {
  const queue = [...job.plans];
  // After a failure the rebuild cannot succeed: the other workers finish their table and stop.
  const stopOnFailure = (err: unknown): never => {
    queue.length = 0;
    throw err;
  };
  const own = async () => {
    for (let plan = queue.shift(); plan; plan = queue.shift()) {
      await materialize(job.client, job.orgId, job.formId, plan, job.tables.get(plan.key)!, { staged: false }).catch(stopOnFailure);
    }
  };
  const helper = async () => {
    if (queue.length === 0) return;
    let conn: Client;
    try {
      conn = await job.openHelper();
    } catch {
      // No connection to spare (max_connections, a pooler's limit): the others take its share.
      return;
    }
    const mine: string[] = [];
    try {
      await conn.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      await conn.query(`SET TRANSACTION SNAPSHOT ${escapeLiteral(job.snapshot)}`);
      await pinTextForms(conn);
      for (let plan = queue.shift(); plan; plan = queue.shift()) {
        const table = job.tables.get(plan.key)!;
        await materialize(conn, job.orgId, job.formId, plan, table, { staged: true });
        mine.push(table);
      }
      await conn.query("COMMIT");
      job.staged.push(...mine);
    } catch (err) {
      await conn.query("ROLLBACK").catch(() => undefined);
      stopOnFailure(err);
    } finally {
      await conn.end().catch(() => undefined);
    }
  };
  const settled = await Promise.allSettled([own(), ...Array.from({ length: job.parallelism - 1 }, helper)]);
  const failures = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as unknown] : []));
  if (failures.length > 0) throw failures.find(isTransient) ?? failures[0];
}

type Queryable = Pick<PoolClient, "query">;

async function materialize(client: Queryable, orgId: string, formId: string, plan: DatasetPlan, table: string, opts: { staged: boolean }): Promise<void> {
  await client.query(`DROP TABLE IF EXISTS ${table}`);
  await client.query(createTableSql(table, plan));
  await insertRenderedRows(client, orgId, formId, plan, table);
  // Indexes after the bulk insert (one sort each instead of a tree maintained row by row), with
  // enough sort memory that a form of millions of rows does not spill to disk.
  await client.query("SET LOCAL maintenance_work_mem = '256MB'");
  for (const sql of createIndexesSql(table, plan)) await client.query(sql);
  // Statistics of the sort columns only: the export plans on them; the text columns' statistics
  // would cost more than the rest of the build and nothing filters on them. A 3 000-row sample
  // (target 10) is plenty for columns read in index order and is 6x cheaper than the default.
  await client.query("SET LOCAL default_statistics_target = 10");
  await client.query(`ANALYZE ${table} (${plan.gridPath.length > 0 ? "organization_id, last_modified, id, row_index" : "organization_id, last_modified, id"})`);
  await client.query(
    `INSERT INTO form_ds.dataset_tables (organization_id, table_name, dataset_key, form_id, plan, staged) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (organization_id, table_name) DO UPDATE SET dataset_key = excluded.dataset_key, plan = excluded.plan, staged = excluded.staged, retired_at = NULL`,
    [orgId, table, plan.key, formId, serializePlan(plan), opts.staged],
  );
}

/**
 * Fills a new table with every row of the dataset. Optimistic conversions first (no regex per date);
 * a malformed date of a recognised shape makes that statement raise, and the rows are rendered again
 * with the guarded conversions, which give the same text for every other value.
 */
async function insertRenderedRows(client: Queryable, orgId: string, formId: string, plan: DatasetPlan, table: string): Promise<void> {
  const insert = (conversions: Conversions) =>
    client.query(`INSERT INTO ${table} (${tableColumnNames(plan).join(", ")})\n${renderRowsSql(plan, { onlySubmissions: false, conversions })}`, [orgId, formId]);
  await client.query("SAVEPOINT optimistic_rows");
  try {
    await insert("optimistic");
    await client.query("RELEASE SAVEPOINT optimistic_rows");
  } catch (err) {
    if (!isDataException(err)) throw err;
    await client.query("ROLLBACK TO SAVEPOINT optimistic_rows");
    await insert("guarded");
  }
}

/** The plan as stored: grid children are not needed to render a dataset's own columns. */
export const serializePlan = (plan: DatasetPlan): string => JSON.stringify(plan, (k, v) => (k === "fields" ? undefined : v));

const registryColumns = (plan: DatasetPlan) =>
  plan.columns.map((c) => ({ key: c.key, dataType: c.dataType, label: c.label, source: { kind: "table", column: c.tableColumn } }));

async function upsertRegistryRow(
  client: PoolClient,
  orgId: string,
  plan: DatasetPlan,
  fields: { generation: number; state: "ready" | "failed"; tableName: string | null; error: string | null },
): Promise<void> {
  // Never overwrites another dataset's row: keys are derived as free, so a conflict is a bug to surface.
  const written = await client.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, parent_key, columns, name_assignments,
                                   shape_fingerprint, generation, state, table_name, error)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (organization_id, key) DO UPDATE SET
       kind = excluded.kind, source_ref = excluded.source_ref, display_name = excluded.display_name, parent_key = excluded.parent_key,
       columns = excluded.columns, name_assignments = excluded.name_assignments, shape_fingerprint = excluded.shape_fingerprint,
       generation = excluded.generation, state = excluded.state, table_name = excluded.table_name, error = excluded.error,
       updated_at = clock_timestamp()
     WHERE dataset_registry.source_ref = excluded.source_ref AND dataset_registry.kind IN ('submission', 'grid')`,
    [
      orgId,
      plan.key,
      plan.kind,
      plan.sourceRef,
      plan.displayName,
      plan.parentKey ?? null,
      JSON.stringify(registryColumns(plan)),
      JSON.stringify(plan.nameAssignments),
      plan.shapeFingerprint,
      fields.generation,
      fields.state,
      fields.tableName,
      fields.error,
    ],
  );
  if (written.rowCount !== 1) throw new Error(`dataset key '${plan.key}' belongs to another dataset`);
}

/** Points the registry at the new tables; rows of this form no longer derived (renames) retire. */
async function swapRegistry(
  client: PoolClient,
  orgId: string,
  plans: DatasetPlan[],
  previous: RegistryRow[],
  tables: Map<string, string>,
  generation: number,
): Promise<string[]> {
  for (const plan of plans) {
    await upsertRegistryRow(client, orgId, plan, { generation, state: "ready", tableName: tables.get(plan.key)!, error: null });
  }
  const live = new Set(plans.map((p) => p.key));
  const retired = previous.filter((p) => p.state !== "retired" && !live.has(p.key)).map((p) => p.key);
  if (retired.length > 0) {
    // A retired key keeps its row (and so its name) forever; its table goes.
    await client.query(
      `UPDATE dataset_registry SET state = 'retired', table_name = NULL, error = NULL, updated_at = clock_timestamp()
        WHERE organization_id = $1 AND key = ANY($2::text[])`,
      [orgId, retired],
    );
  }
  await bumpDatasetChanges(client, orgId, [...live, ...retired]);
  return retired;
}

/** Marks the form's live datasets failed; a form that never built gets failed rows (no table) so the key answers 503. */
export async function markFormFailed(
  client: PoolClient,
  orgId: string,
  message: string,
  previous: RegistryRow[],
  plans: DatasetPlan[],
  generation: number,
): Promise<string[]> {
  const live = previous.filter((p) => p.state !== "retired");
  if (live.length > 0) {
    await client.query(
      `UPDATE dataset_registry SET state = 'failed', error = $3, updated_at = clock_timestamp()
        WHERE organization_id = $1 AND key = ANY($2::text[])`,
      [orgId, live.map((p) => p.key), message],
    );
    return live.map((p) => p.key);
  }
  for (const plan of plans) await upsertRegistryRow(client, orgId, plan, { generation, state: "failed", tableName: null, error: message });
  return plans.map((p) => p.key);
}
