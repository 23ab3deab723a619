/**
 * Pending floors (migration 090, raisePendingFloors in src/visibility.ts; issue 15): a form dataset
 * page's pending part in one primary-key probe, whatever the change log's backlog or dead rows,
 * never above a change that is pending or logged later, never going down.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "pg";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { datasetHorizon, isSettled, listingHorizon, pageHorizon, raisePendingFloors } from "../src/visibility";

describe("pending floors in PostgreSQL", () => {
  const pool = testPool();
  const sessions: Client[] = [];
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await pool.end();
  });

  async function session(): Promise<Client> {
    const client = new Client({ connectionString: testDatabaseUrl(), application_name: "source-system" });
    await client.connect();
    sessions.push(client);
    return client;
  }

  /** Logs a pending change of `form` stamped `stamp` (SQL expression) on `db`; returns the stamp in µs. */
  async function logChange(db: Pick<Client, "query">, org: string, form: string, stamp = "clock_timestamp()"): Promise<bigint> {
    const { rows } = await db.query<{ t: string }>(
      `INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id, source_last_modified)
       VALUES ($1, 'submission', $2, $3, ${stamp}) RETURNING (extract(epoch FROM source_last_modified) * 1000000)::bigint::text AS t`,
      [org, form, randomUUID()],
    );
    return BigInt(rows[0].t);
  }

  const floorOf = async (org: string, form: string) =>
    (
      await pool.query<{ t: string; held: boolean }>(
        "SELECT (extract(epoch FROM pending_from) * 1000000)::bigint::text AS t, held FROM form_dataset_pending_floors WHERE organization_id = $1 AND form_id = $2",
        [org, form],
      )
    ).rows.map((r) => ({ micros: BigInt(r.t), held: r.held }))[0];

  /** Scans of the change log that pageHorizon makes, counted in one transaction. */
  async function changeLogScansOfPage(org: string, form: string): Promise<number> {
    const client = await session();
    try {
      await client.query("BEGIN");
      await pageHorizon(client, org, form);
      const { rows } = await client.query<{ n: string }>(
        "SELECT (coalesce(idx_scan, 0) + seq_scan)::text AS n FROM pg_stat_xact_user_tables WHERE relname = 'form_dataset_changes'",
      );
      await client.query("COMMIT");
      return Number(rows[0].n);
    } finally {
      await client.end();
      sessions.splice(sessions.indexOf(client), 1);
    }
  }

  it("once raised, a page reads the floor instead of the change log, dead rows or not", async () => {
    const org = await createTestOrganization(pool);
    const [form, unfloored] = [randomUUID(), randomUUID()];
    for (let i = 0; i < 50; i++) await logChange(pool, org, form, "now() - interval '1 hour'");
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1 AND form_id = $2", [org, form]); // consumed: dead rows
    await raisePendingFloors(pool, org, [form]);
    const floor = await floorOf(org, form);
    expect(floor).toBeDefined();

    const page = await pageHorizon(pool, org, form);
    expect(page.pendingSince).toBe(floor.micros);
    expect(await changeLogScansOfPage(org, form)).toBe(0);
    // A form without a floor is answered exactly from the change log, as before.
    const stamp = await logChange(pool, org, unfloored, "now() - interval '2 hours'");
    expect((await pageHorizon(pool, org, unfloored)).pendingSince).toBe(stamp);
    expect(await changeLogScansOfPage(org, unfloored)).toBeGreaterThan(0);
    // The listing agrees with the pages.
    const listed = await listingHorizon(pool, org, [form, unfloored]);
    expect(listed.pendingByForm.get(form)).toBe(floor.micros);
    expect(listed.pendingByForm.get(unfloored)).toBe(stamp);
    // Without form ids (the catalog's listing): every form with a floor (nothing pending) or a pending change.
    const everyForm = await listingHorizon(pool, org);
    expect(everyForm.pendingByForm).toEqual(new Map([[form, floor.micros], [unfloored, stamp]]));
  });

  it("migration 115 gives every form without a floor one (held, at or below its pending changes and open writers), so no page keeps the exact probe", async () => {
    const org = await createTestOrganization(pool);
    const [built, floored] = [randomUUID(), randomUUID()];
    for (const [form, prefix] of [[built, "BF"], [floored, "FL"]]) {
      await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, $3, $3)", [org, form, prefix]);
    }
    // A form built before migration 090: no floor, a pending change; another form with its floor raised.
    const stamp = await logChange(pool, org, built, "now() - interval '2 hours'");
    await raisePendingFloors(pool, org, [floored]);
    const flooredBefore = await floorOf(org, floored);
    // A writer open since before the migration: whatever it logs later is stamped after its start.
    const writer = await session();
    await writer.query("BEGIN");
    await writer.query("SELECT pg_current_xact_id()");
    const migration = readFileSync(join(__dirname, "../../db/migrations/115_form_dataset_pending_floors_for_every_form.sql"), "utf8");

    // Applied in a transaction rolled back at the end: the shared database's other forms stay as they are.
    const client = await session();
    await client.query("BEGIN");
    try {
      await client.query(migration);
      const floor = await client.query<{ t: string; held: boolean }>(
        "SELECT (extract(epoch FROM pending_from) * 1000000)::bigint::text AS t, held FROM form_dataset_pending_floors WHERE organization_id = $1 AND form_id = $2",
        [org, built],
      );
      expect(floor.rows.map((r) => ({ micros: BigInt(r.t), held: r.held }))).toEqual([{ micros: stamp, held: true }]);
      const scans = async () =>
        Number((await client.query<{ n: string }>("SELECT (coalesce(idx_scan, 0) + seq_scan)::text AS n FROM pg_stat_xact_user_tables WHERE relname = 'form_dataset_changes'")).rows[0].n);
      const before = await scans();
      const page = await pageHorizon(client, org, built);
      expect(page.pendingSince).toBe(stamp);
      expect(await scans()).toBe(before); // the floor's probe, not the change log's
      // A form that had its floor keeps it.
      const kept = await client.query<{ t: string }>(
        "SELECT (extract(epoch FROM pending_from) * 1000000)::bigint::text AS t FROM form_dataset_pending_floors WHERE organization_id = $1 AND form_id = $2",
        [org, floored],
      );
      expect(BigInt(kept.rows[0].t)).toBe(flooredBefore.micros);
    } finally {
      await client.query("ROLLBACK");
      await writer.query("ROLLBACK");
    }
  });

  it("stays at or below a pending change, and at or below one a writer open during the raise commits later", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const pendingStamp = await logChange(pool, org, form, "now() - interval '10 minutes'");
    const writer = await session();
    await writer.query("BEGIN");
    await writer.query("SELECT pg_current_xact_id()"); // a writer: holds a transaction id
    const writerStarted = BigInt((await writer.query<{ t: string }>("SELECT (extract(epoch FROM now()) * 1000000)::bigint::text AS t")).rows[0].t);

    await raisePendingFloors(pool, org, [form]);
    expect((await floorOf(org, form)).micros).toBe(pendingStamp);
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1 AND form_id = $2", [org, form]);
    await raisePendingFloors(pool, org, [form]);
    const floor = await floorOf(org, form);
    expect(floor.micros).toBeLessThanOrEqual(writerStarted);
    expect(floor.held).toBe(true);

    // The writer logs its change (stamped now, after its start) and commits after the raise.
    const late = await logChange(writer, org, form);
    await writer.query("COMMIT");
    const page = await pageHorizon(pool, org, form);
    expect(page.visibleBeforeMicros).toBeLessThanOrEqual(late);
    expect(page.pendingHeld).toBe(true);
  });

  it("never goes down, even when a change stamped before it turns up (a backfill's explicit stamp)", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    await raisePendingFloors(pool, org, [form]);
    const first = await floorOf(org, form);
    await logChange(pool, org, form, "now() - interval '1 day'");
    await raisePendingFloors(pool, org, [form]);
    const second = await floorOf(org, form);
    expect(second.micros).toBe(first.micros);
    expect(second.held).toBe(true);
  });

  it("a rewrite of a quiet form's dataset (a renamed site) flags the form's floor held, and the next raise lifts the floor past it", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'RW', 'RW')", [org, form]);
    await pool.query("INSERT INTO dataset_registry (organization_id, key, kind, source_ref, columns, shape_fingerprint) VALUES ($1, 'rw_checks', 'submission', $2, '[]', 'rw')", [
      org,
      form,
    ]);
    // A quiet form: its floor raised with nothing pending or counted after it.
    await raisePendingFloors(pool, org, [form]);
    const quiet = await floorOf(org, form);
    expect(quiet.held).toBe(false);

    await pool.query("SELECT bump_rewritten_datasets(ARRAY[$1::uuid], ARRAY['form'])", [org]);
    const settles = BigInt(
      (await pool.query<{ t: string }>("SELECT (extract(epoch FROM settles_at) * 1000000)::bigint::text AS t FROM dataset_changes WHERE organization_id = $1 AND dataset = 'rw_checks'", [org]))
        .rows[0].t,
    );
    const listed = async () => datasetHorizon(await listingHorizon(pool, org), { kind: "submission", sourceRef: form });
    // The floor holds the dataset's token back (below the rewrite), and is now flagged for the raise
    // that the schema service makes of every held floor. Before migration 125 it stayed unflagged,
    // so nothing raised it and the token stayed held until the form's next own change.
    expect(isSettled(String(settles), await listed())).toBe(false);
    expect(await floorOf(org, form)).toEqual({ micros: quiet.micros, held: true });

    // The raise (raiseHeldPendingFloors): past the rewrite once no writer of the shared test database holds the horizon.
    let raised = quiet;
    for (let attempt = 0; attempt < 50 && raised.micros <= settles; attempt++) {
      await raisePendingFloors(pool, org, [form]);
      raised = await floorOf(org, form);
      if (raised.micros <= settles) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(raised.micros).toBeGreaterThan(settles);
    expect(isSettled(String(settles), await listed())).toBe(true);
  });

  it("needs READ COMMITTED: its second statement must see what committed after the first", async () => {
    const org = await createTestOrganization(pool);
    const client = await session();
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await expect(raisePendingFloors(client, org, [randomUUID()])).rejects.toThrow(/READ COMMITTED/);
    await client.query("ROLLBACK");
  });
});
