import type { PoolClient } from "pg";
import { upsertRegistryRows, type ColumnSpec } from "@exportsvc/datasets";
import type { RegistryRow } from "./build-types";
import type { DatasetPlan } from "./derive";
import { bumpDatasetChanges } from "./sql-helpers";

const registryColumns = (plan: DatasetPlan): ColumnSpec[] =>
  plan.columns.map((c) => ({ key: c.key, dataType: c.dataType, label: c.label, source: { kind: "table", column: c.tableColumn } }));

type RowFields = { generation: number; state: "ready" | "failed"; tableName: string | null; error: string | null };

/** The form's registry rows, all in one statement (a form with grids has several). */
function writeRegistryRows(client: PoolClient, orgId: string, plans: DatasetPlan[], fields: (plan: DatasetPlan) => RowFields): Promise<void> {
  // Never overwrites another dataset's row: keys are derived as free, so a conflict is a bug to surface.
  return upsertRegistryRows(
    client,
    orgId,
    plans.map((plan) => ({
      key: plan.key,
      kind: plan.kind,
      sourceRef: plan.sourceRef,
      displayName: plan.displayName,
      parentKey: plan.parentKey,
      columns: registryColumns(plan),
      nameAssignments: plan.nameAssignments,
      ...fields(plan),
    })),
  );
}

/** Points the registry at the new tables; rows of this form no longer derived (renames) retire. */
export async function swapRegistry(
  client: PoolClient,
  orgId: string,
  formId: string,
  plans: DatasetPlan[],
  previous: RegistryRow[],
  tables: Map<string, string>,
  generation: number,
): Promise<string[]> {
  await writeRegistryRows(client, orgId, plans, (plan) => ({ generation, state: "ready", tableName: tables.get(plan.key)!, error: null }));
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
  // The newest source stamp of the form (index probe): a submission stamped in the future keeps the
  // tokens held until it is servable (migration 040, settles_at).
  const newest = await client.query<{ stamp: string | null }>(
    "SELECT max(last_modified)::text AS stamp FROM submissions WHERE organization_id = $1 AND form_id = $2",
    [orgId, formId],
  );
  await bumpDatasetChanges(client, orgId, [...live, ...retired], newest.rows[0].stamp);
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
  await writeRegistryRows(client, orgId, plans, () => ({ generation, state: "failed", tableName: null, error: message }));
  return plans.map((p) => p.key);
}
