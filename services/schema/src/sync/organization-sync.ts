import type { Pool, PoolClient } from "pg";
import { deleteQueuedRegistrySync, lockOrganizationRegistry, lockQueuedRegistrySync } from "@exportsvc/datasets";
import { inTransaction } from "@exportsvc/db";
import type { DatasetSyncer } from "./syncer";

/** Runs every syncer for the organization under its advisory lock, in the caller's transaction. */
export async function runSyncers(client: PoolClient, organizationId: string, syncers: readonly DatasetSyncer[]): Promise<number> {
  await lockOrganizationRegistry(client, organizationId);
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
    const queued = await lockQueuedRegistrySync(client, organizationId);
    const changed = await runSyncers(client, organizationId, syncers);
    if (queued) await deleteQueuedRegistrySync(client, organizationId);
    return changed;
  });
}
