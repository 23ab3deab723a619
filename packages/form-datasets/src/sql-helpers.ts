import { createHash } from "node:crypto";
import type { PoolClient } from "pg";
import { isDatabaseUnavailable } from "@exportsvc/db";

export const FORM_DS_SCHEMA = "form_ds";

/**
 * Pins the session settings that make PostgreSQL's text forms the API's value forms for the rest of
 * the transaction, whatever pool the caller handed in.
 */
export async function pinTextForms(client: Pick<PoolClient, "query">): Promise<void> {
  await client.query("SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'");
}

/** Two int4 halves of a stable hash of (organization, form): the advisory lock serializing its writers. */
export function formLockKeys(orgId: string, formId: string): [number, number] {
  const digest = createHash("sha256").update(`form-datasets/${orgId}/${formId}`).digest();
  return [digest.readInt32BE(0), digest.readInt32BE(4)];
}

/**
 * The lock under which an organization's form dataset keys are assigned: two forms rebuilt at once
 * must not both take the same free name.
 */
export function organizationKeysLockKeys(orgId: string): [number, number] {
  const digest = createHash("sha256").update(`form-dataset-keys/${orgId}`).digest();
  return [digest.readInt32BE(0), digest.readInt32BE(4)];
}

/** Schema-qualified, short and stable: one name per (organization, dataset source, generation). */
export function materializedTableName(orgId: string, sourceRef: string, generation: number): string {
  const hash = createHash("sha256").update(`${orgId}/${sourceRef}`).digest("hex").slice(0, 16);
  return `${FORM_DS_SCHEMA}.t_${hash}_g${generation}`;
}

/** Rows of `dataset_changes` behind the changeToken of form datasets, keyed by dataset key. */
export async function bumpDatasetChanges(client: PoolClient, orgId: string, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await client.query(
    `INSERT INTO dataset_changes (organization_id, dataset, version, changed_at)
     SELECT $1, k, 1, clock_timestamp() FROM unnest($2::text[]) AS k
     ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at`,
    [orgId, keys],
  );
}

/** Errors that mean "try again later" rather than "this form cannot be built as it stands". */
export const isTransient = (err: unknown): boolean =>
  isDatabaseUnavailable(err) || ["40001", "40P01", "55P03"].includes((err as { code?: string })?.code ?? "");

export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
