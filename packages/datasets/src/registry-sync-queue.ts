import type { Queryable } from "./registry";

/** The NOTIFY channel on which registry_sync_queue announces new rows (the schema service LISTENs). */
export const REGISTRY_SYNC_CHANNEL = "registry_sync";

// Namespace of the per-organization advisory lock (two-key form: namespace, hashtext(org id)).
const REGISTRY_LOCK_NAMESPACE = 724_311_902;
const DEFINITIONS_LOCK_NAMESPACE = 724_311_903;

/** Serializes registry syncs of one organization until the caller's transaction ends. */
export async function lockOrganizationRegistry(db: Queryable, organizationId: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [REGISTRY_LOCK_NAMESPACE, organizationId]);
}

/**
 * Claims the oldest queued organization not in `skip` (FOR UPDATE SKIP LOCKED, so replicas and workers
 * share the queue), or undefined when none is left. The row stays locked until the transaction ends.
 */
export async function claimQueuedRegistrySync(db: Queryable, skip: string[]): Promise<string | undefined> {
  const { rows } = await db.query<{ organization_id: string }>(
    `SELECT organization_id FROM registry_sync_queue
          WHERE organization_id <> ALL($1::uuid[])
          ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [skip],
  );
  return rows[0]?.organization_id;
}

/** Locks the organization's queue row if it has one (the same lock order as claiming it); true if queued. */
export async function lockQueuedRegistrySync(db: Queryable, organizationId: string): Promise<boolean> {
  const queued = await db.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1 FOR UPDATE", [organizationId]);
  return Boolean(queued.rowCount);
}

/** Settles the organization's queue row (in the transaction that synced it). */
export async function deleteQueuedRegistrySync(db: Queryable, organizationId: string): Promise<void> {
  await db.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [organizationId]);
}

/**
 * Under a transaction-scoped lock on the definitions `name`: when their stored fingerprint differs
 * from `fingerprint`, queues every organization (enabled for export or already in the registry),
 * records the new fingerprint and notifies the queue. Returns the organizations queued.
 */
export async function requeueAllIfDefinitionsChanged(db: Queryable, name: string, fingerprint: string): Promise<string[]> {
  await db.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [DEFINITIONS_LOCK_NAMESPACE, name]);
  const { rows } = await db.query<{ fingerprint: string }>("SELECT fingerprint FROM registry_definitions WHERE name = $1", [name]);
  if (rows[0]?.fingerprint === fingerprint) return [];
  const queued = await db.query<{ organization_id: string }>(
    `INSERT INTO registry_sync_queue (organization_id, requested_at)
       SELECT organization_id, clock_timestamp() FROM (
         SELECT organization_id FROM export_organizations
         UNION
         SELECT DISTINCT organization_id FROM dataset_registry
       ) AS orgs
       ORDER BY organization_id
       ON CONFLICT (organization_id) DO UPDATE SET requested_at = excluded.requested_at
       RETURNING organization_id`,
  );
  await db.query(
    `INSERT INTO registry_definitions (name, fingerprint) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET fingerprint = excluded.fingerprint, updated_at = clock_timestamp()`,
    [name, fingerprint],
  );
  if (queued.rows.length > 0) await db.query(`SELECT pg_notify('${REGISTRY_SYNC_CHANNEL}', '')`);
  return queued.rows.map((r) => r.organization_id);
}
