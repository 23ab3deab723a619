import { createHash } from "node:crypto";
import type { Pool } from "pg";
import { FIXED_DATASETS, RESERVED_RESOURCE_COLUMNS } from "@exportsvc/datasets";
import { inTransaction } from "@exportsvc/db";

const DEFINITIONS_LOCK_NAMESPACE = 724_311_903;

/** Fingerprint of everything in code that shapes the fixed datasets' registry rows. */
export function fixedDefinitionsFingerprint(): string {
  return createHash("sha256").update(JSON.stringify({ FIXED_DATASETS, RESERVED_RESOURCE_COLUMNS })).digest("hex");
}

/**
 * When the code's definitions differ from those the registry was last synced with, queues every
 * organization (enabled for export or already in the registry) and records the new fingerprint.
 * Runs once per deploy in effect: replicas starting together serialize on an advisory lock and the
 * later ones find the fingerprint already current. Returns the organizations queued.
 */
export function requeueOnDefinitionsChange(pool: Pool, name = "fixed-datasets", fingerprint = fixedDefinitionsFingerprint()): Promise<string[]> {
  return inTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [DEFINITIONS_LOCK_NAMESPACE, name]);
    const { rows } = await client.query<{ fingerprint: string }>("SELECT fingerprint FROM registry_definitions WHERE name = $1", [name]);
    if (rows[0]?.fingerprint === fingerprint) return [];
    const queued = await client.query<{ organization_id: string }>(
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
    await client.query(
      `INSERT INTO registry_definitions (name, fingerprint) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET fingerprint = excluded.fingerprint, updated_at = clock_timestamp()`,
      [name, fingerprint],
    );
    if (queued.rows.length > 0) await client.query("SELECT pg_notify('registry_sync', '')");
    return queued.rows.map((r) => r.organization_id);
  });
}
