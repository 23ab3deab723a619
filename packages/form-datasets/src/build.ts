import type { Pool } from "pg";
import { inTransaction } from "@exportsvc/db";
import { DEFAULT_DROP_GRACE_MS, type BuildOptions, type BuildResult, type RebuildOptions } from "./build-types";
import { openHelperClient } from "./materialize";
import { rebuildFormInTransaction } from "./rebuild";
import { dropRetiredTables } from "./retired-tables";

/**
 * Rebuilds every dataset of a form beside the live tables and swaps the registry rows in one
 * transaction; the old tables are dropped after the commit (after a grace period). A rebuild replaces
 * the datasets whole or leaves them untouched; a failure (for example a site with a blank time zone)
 * marks the form's registry rows `failed` and keeps the previous tables. Transient database failures
 * are thrown.
 */
export async function buildDataset(pool: Pool, orgId: string, formId: string, opts: BuildOptions & RebuildOptions = {}): Promise<BuildResult> {
  const client = await pool.connect();
  try {
    const outcome = await inTransaction(client, (tx) => rebuildFormInTransaction(tx, orgId, formId, { openHelper: () => openHelperClient(pool), ...opts }));
    await dropRetiredTables(client, { graceMs: opts.dropGraceMs ?? DEFAULT_DROP_GRACE_MS, organizationId: orgId });
    return outcome.result;
  } finally {
    client.release();
  }
}
