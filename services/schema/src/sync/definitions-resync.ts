import { createHash } from "node:crypto";
import type { Pool } from "pg";
import { FIXED_DATASETS, requeueAllIfDefinitionsChanged, RESERVED_RESOURCE_COLUMNS } from "@exportsvc/datasets";
import { inTransaction } from "@exportsvc/db";

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
  return inTransaction(pool, (client) => requeueAllIfDefinitionsChanged(client, name, fingerprint));
}
