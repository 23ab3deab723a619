import type { PoolClient } from "pg";
import { lockFormRegistryRows, raisePendingFloors } from "@exportsvc/datasets";
import { DEFAULT_REBUILD_PARALLELISM, type BuildResult, type BuildStatus, type RebuildOptions, type RegistryRow } from "./build-types";
import { deriveFormDatasets, fieldIdsWithColumns } from "./derive";
import { mergeRetainedFields, parseFieldTree } from "./fields";
import { materialize, materializeInParallel } from "./materialize";
import { markFormFailed, swapRegistry } from "./registry-swap";
import { assertSiteTimeZones } from "./site-time-zones";
import { ensureOrganizationSchema, errorMessage, formLockKeys, isTransient, materializedTableName, organizationKeysLockKeys, organizationSchemaName, pinTextForms } from "./sql-helpers";

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
  let parallelism = Math.max(1, Math.min(opts.parallelism ?? DEFAULT_REBUILD_PARALLELISM, plans.length));
  const openHelper = opts.openHelper;
  // The organization's schema must be committed before helpers create tables in it: on a helper
  // connection of its own when helpers will render, else in this transaction (rebuilds of one
  // organization are serialized by the keys lock above, so two never race to create it here). With
  // no connection to spare for that, the rebuild renders on its own connection.
  const schemaReady = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [organizationSchemaName(orgId)]);
  if (schemaReady.rowCount === 0) {
    let created = false;
    if (parallelism > 1 && openHelper) {
      const helper = await openHelper().catch(() => null);
      if (helper) {
        try {
          await ensureOrganizationSchema(helper, orgId);
          created = true;
        } finally {
          await helper.end().catch(() => undefined);
        }
      }
    }
    if (!created) {
      parallelism = 1;
      await ensureOrganizationSchema(client, orgId);
    }
  }
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
      await materializeInParallel({ client, orgId, formId, plans, tables, parallelism, openHelper, snapshot, staged, cursorCodec: opts.cursorCodec });
    } else {
      for (const plan of plans) await materialize(client, orgId, formId, plan, tables.get(plan.key)!, { staged: false, cursorCodec: opts.cursorCodec });
    }
    const retired = await swapRegistry(client, orgId, formId, plans, previous, tables, generation);
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
    // Last, after the rows are counted: pages read the form's floor instead of its change log.
    await raisePendingFloors(client, orgId, [formId]);
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

/** This form's registry rows (any state), locked for the rest of the transaction, as the rebuild reads them. */
export async function loadFormRegistryRows(client: PoolClient, orgId: string, formId: string): Promise<RegistryRow[]> {
  const rows = await lockFormRegistryRows(client, orgId, formId);
  return rows.map((r) => ({
    key: r.key,
    sourceRef: r.source_ref,
    state: r.state,
    nameAssignments: r.name_assignments ?? {},
    generation: r.generation,
    tableName: r.table_name,
  }));
}
