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

/** Two int4 halves of a stable hash of a lock's scope: the keys of `pg_advisory_lock(int, int)`. */
export function advisoryLockKeys(scope: string): [number, number] {
  const digest = createHash("sha256").update(scope).digest();
  return [digest.readInt32BE(0), digest.readInt32BE(4)];
}

/** The advisory lock serializing the writers of one (organization, form). */
export function formLockKeys(orgId: string, formId: string): [number, number] {
  return advisoryLockKeys(`form-datasets/${orgId}/${formId}`);
}

/**
 * The lock under which an organization's form dataset keys are assigned: two forms rebuilt at once
 * must not both take the same free name.
 */
export function organizationKeysLockKeys(orgId: string): [number, number] {
  return advisoryLockKeys(`form-dataset-keys/${orgId}`);
}

/**
 * The schema holding one organization's form dataset tables: `form_ds_<organization id without
 * dashes>` (40 characters). One schema per organization is the unit Citus schema-based sharding
 * places on one node (docs/scale-out.md); `form_ds` itself keeps the shared registry of tables and
 * the tables of builds made before per-organization schemas (migration 081 moved those).
 */
export function organizationSchemaName(orgId: string): string {
  const hex = orgId.toLowerCase().replace(/-/g, "");
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error(`not an organization id: ${JSON.stringify(orgId)}`);
  return `${FORM_DS_SCHEMA}_${hex}`;
}

/** Schema-qualified, short and stable: one name per (organization, dataset source, generation). */
export function materializedTableName(orgId: string, sourceRef: string, generation: number): string {
  const hash = createHash("sha256").update(`${orgId}/${sourceRef}`).digest("hex").slice(0, 16);
  return `${organizationSchemaName(orgId)}.t_${hash}_g${generation}`;
}

/**
 * Creates the organization's schema if it does not exist, committed on its own (a rebuild's helper
 * connections must see it before the rebuild commits). Two creators at once: the loser's duplicate
 * error means the schema is there.
 */
export async function ensureOrganizationSchema(client: Pick<PoolClient, "query">, orgId: string): Promise<void> {
  const schema = organizationSchemaName(orgId);
  const exists = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
  if (exists.rowCount) return;
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  } catch (err) {
    if ((err as { code?: string }).code !== "23505" && (err as { code?: string }).code !== "42P06") throw err;
  }
}

/**
 * Rows of `dataset_changes` behind the changeToken of form datasets, keyed by dataset key.
 * `settles_at` (migration 040) becomes the later of now and the newest source stamp of the rows just
 * written (a submission stamped in the future), so the token stays "held" until they are servable.
 */
export async function bumpDatasetChanges(client: PoolClient, orgId: string, keys: string[], newestStamp: string | null = null): Promise<void> {
  if (keys.length === 0) return;
  await client.query(
    `INSERT INTO dataset_changes (organization_id, dataset, version, changed_at, settles_at)
     SELECT $1, k, 1, clock_timestamp(), greatest(clock_timestamp(), $3::timestamptz) FROM unnest($2::text[]) AS k
     ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at,
       settles_at = greatest(dataset_changes.settles_at, excluded.settles_at)`,
    [orgId, keys, newestStamp],
  );
}

/** Errors that mean "try again later" rather than "this form cannot be built as it stands". */
export const isTransient = (err: unknown): boolean =>
  isDatabaseUnavailable(err) || ["40001", "40P01", "55P03"].includes((err as { code?: string })?.code ?? "");

export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
