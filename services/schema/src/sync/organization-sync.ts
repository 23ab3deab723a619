import type { Pool, PoolClient } from "pg";
import { inTransaction } from "@exportsvc/db";
import type { DatasetSyncer } from "./syncer";

// Namespace of the per-organization advisory lock (two-key form: namespace, hashtext(org id)).
const REGISTRY_LOCK_NAMESPACE = 724_311_902;

/** Runs every syncer for the organization under its advisory lock, in the caller's transaction. */
export async function runSyncers(client: PoolClient, organizationId: string, syncers: readonly DatasetSyncer[]): Promise<number> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [REGISTRY_LOCK_NAMESPACE, organizationId]);
  let changed = 0;
  for (const syncer of syncers) changed += await syncer.sync(client, organizationId);
  return changed;
}

/**
 * Brings the organization's registry up to date now (the SyncDatasets RPC) and settles its queue
 * row in the same transaction. Lock order matches the queue worker (queue row, then advisory lock),
 * so the two never deadlock; a worker busy with this organization is simply waited for. Only a queue
 * row locked here at the start is deleted: one queued later (by a change this sync may not have
 * seen) is left for the worker, and deleting it would mean waiting for whoever holds it.
 */
export function syncOrganization(pool: Pool, organizationId: string, syncers: readonly DatasetSyncer[]): Promise<number> {
  return inTransaction(pool, async (client) => {
    const queued = await client.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1 FOR UPDATE", [organizationId]);
    const changed = await runSyncers(client, organizationId, syncers);
    if (queued.rowCount) await client.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [organizationId]);
    return changed;
  });
}
