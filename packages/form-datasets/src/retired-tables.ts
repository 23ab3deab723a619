import type { PoolClient } from "pg";
import { inTransaction } from "@exportsvc/db";
import { formLockKeys, isTransient } from "./sql-helpers";

/**
 * Drops replaced tables whose grace has passed, each in its own short transaction. A table still
 * read by a long export is skipped (lock timeout) and retried on a later pass, so maintenance never
 * queues behind an export.
 */
export async function dropRetiredTables(client: PoolClient, opts: { graceMs: number; organizationId?: string }): Promise<number> {
  const due = await client.query<{ organization_id: string; table_name: string }>(
    `SELECT organization_id, table_name FROM form_ds.dataset_tables
      WHERE retired_at IS NOT NULL AND retired_at <= clock_timestamp() - make_interval(secs => $1::double precision / 1000)
        AND ($2::uuid IS NULL OR organization_id = $2)
      ORDER BY retired_at LIMIT 100`,
    [opts.graceMs, opts.organizationId ?? null],
  );
  let dropped = await dropOrphanedStagedTables(client, opts.organizationId);
  for (const t of due.rows) {
    try {
      await inTransaction(client, async () => {
        await client.query("SET LOCAL lock_timeout = '200ms'");
        await client.query(`DROP TABLE IF EXISTS ${t.table_name}`);
        await client.query("DELETE FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2", [t.organization_id, t.table_name]);
      });
      dropped++;
    } catch (err) {
      if (isTransient(err) && (err as { code?: string }).code !== "55P03") throw err;
    }
  }
  return dropped;
}

/**
 * Drops staged tables whose rebuild ended without adopting them (it failed, was rolled back or its
 * process died). A rebuild holds its form's lock until it commits, so a staged table whose form lock
 * can be taken belongs to no running rebuild.
 */
async function dropOrphanedStagedTables(client: PoolClient, organizationId?: string): Promise<number> {
  const staged = await client.query<{ organization_id: string; table_name: string; form_id: string }>(
    `SELECT organization_id, table_name, form_id FROM form_ds.dataset_tables
      WHERE staged AND ($1::uuid IS NULL OR organization_id = $1) ORDER BY created_at LIMIT 100`,
    [organizationId ?? null],
  );
  let dropped = 0;
  for (const t of staged.rows) {
    try {
      const droppedHere = await inTransaction(client, async () => {
        await client.query("SET LOCAL lock_timeout = '200ms'");
        const [k1, k2] = formLockKeys(t.organization_id, t.form_id);
        const free = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_xact_lock($1, $2) AS locked", [k1, k2]);
        const still = free.rows[0].locked
          ? await client.query("SELECT 1 FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2 AND staged FOR UPDATE", [t.organization_id, t.table_name])
          : { rowCount: 0 };
        if (!still.rowCount) return false;
        await client.query(`DROP TABLE IF EXISTS ${t.table_name}`);
        await client.query("DELETE FROM form_ds.dataset_tables WHERE organization_id = $1 AND table_name = $2", [t.organization_id, t.table_name]);
        return true;
      });
      if (droppedHere) dropped++;
    } catch (err) {
      if (isTransient(err) && (err as { code?: string }).code !== "55P03") throw err;
    }
  }
  return dropped;
}
