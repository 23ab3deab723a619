/**
 * The visibility horizon's rules against a real PostgreSQL (packages/datasets/src/visibility.ts,
 * migration 040; docs/export.md "Visibility horizon"): only writers hold it, declared writers only
 * for their organization, a live stamp is never before a horizon computed while its writer still
 * looked like a reader, and the floor keeps it from going back.
 */
import { randomUUID } from "node:crypto";
import { Client } from "pg";
import { declaredWriterApplicationName, declareWriterOrganization } from "@exportsvc/common";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { listingHorizon, pageHorizon, type Micros } from "../src/visibility";

const micros = (text: string) => BigInt(text);

describe("visibility horizon in PostgreSQL", () => {
  const pool = testPool();
  const sessions: Client[] = [];
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await pool.end();
  });

  /** Another session with an open transaction; `write` makes it take a transaction id. */
  async function openTransaction(opts: { applicationName?: string; write?: boolean } = {}) {
    const client = new Client({ connectionString: testDatabaseUrl(), application_name: opts.applicationName ?? "source-system" });
    await client.connect();
    sessions.push(client);
    await client.query("BEGIN");
    const started = micros((await client.query<{ t: string }>("SELECT (extract(epoch FROM now()) * 1000000)::bigint::text AS t")).rows[0].t);
    if (opts.write) await client.query("SELECT pg_current_xact_id()");
    return { client, started, end: () => client.query("COMMIT") };
  }

  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it("an open read-only transaction does not hold it; it is reported as an ignored reader", async () => {
    const org = await createTestOrganization(pool);
    const reader = await openTransaction();
    await reader.client.query("SELECT count(*) FROM sites");
    await pause(20);
    const h = await pageHorizon(pool, org, null);
    expect(h.visibleBeforeMicros).toBeGreaterThan(reader.started);
    expect(h.readerSince).toBeLessThanOrEqual(reader.started);
    expect(h.undeclaredWriterSince).toBeUndefined();
    await reader.end();
  });

  it("an undeclared writer holds every organization's horizon at its start", async () => {
    const [a, b] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const writer = await openTransaction({ write: true });
    for (const org of [a, b]) {
      const h = await pageHorizon(pool, org, null);
      expect(h.visibleBeforeMicros).toBeLessThanOrEqual(writer.started);
      expect(h.undeclaredWriterSince).toBe(writer.started);
    }
    await writer.end();
    expect((await pageHorizon(pool, a, null)).visibleBeforeMicros).toBeGreaterThan(writer.started);
  });

  it("a writer that declares its organization holds only that organization's horizon", async () => {
    const [a, b] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const writer = await openTransaction({ applicationName: declaredWriterApplicationName("loader", a), write: true });
    const ofA = await pageHorizon(pool, a, null);
    const ofB = await pageHorizon(pool, b, null);
    expect(ofA.visibleBeforeMicros).toBeLessThanOrEqual(writer.started);
    expect(ofA.declaredWriterSince).toBe(writer.started);
    expect(ofB.visibleBeforeMicros).toBeGreaterThan(writer.started);
    expect(ofB.declaredWriterSince).toBeUndefined();
    expect(ofB.undeclaredWriterSince).toBeUndefined();
    await writer.end();
  });

  it("declareWriterOrganization declares for the transaction only (SET LOCAL)", async () => {
    const [a, b] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const writer = await openTransaction();
    await declareWriterOrganization(writer.client, a);
    await writer.client.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'x')", [a, randomUUID()]);
    expect((await pageHorizon(pool, b, null)).visibleBeforeMicros).toBeGreaterThan(writer.started);
    expect((await pageHorizon(pool, a, null)).visibleBeforeMicros).toBeLessThanOrEqual(writer.started);
    await writer.end();
    expect((await writer.client.query<{ name: string }>("SELECT current_setting('application_name') AS name")).rows[0].name).toBe("source-system");
  });

  it("a live stamp is taken at or after its writer's first write, never before a horizon computed meanwhile", async () => {
    const org = await createTestOrganization(pool);
    const writer = await openTransaction();
    await writer.client.query("SELECT count(*) FROM suppliers"); // reads first: no transaction id yet
    await pause(30);
    const meanwhile = (await pageHorizon(pool, org, null)).visibleBeforeMicros;
    expect(meanwhile).toBeGreaterThan(writer.started);
    const [first, second] = [randomUUID(), randomUUID()];
    // Both stamped now() (the transaction's start) and the column default: lifted to one instant.
    await writer.client.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'a', now())", [org, first]);
    await writer.client.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'b')", [org, second]);
    await writer.end();
    const stamps = (
      await pool.query<{ id: string; t: string }>(
        "SELECT id, (extract(epoch FROM last_modified) * 1000000)::bigint::text AS t FROM suppliers WHERE organization_id = $1",
        [org],
      )
    ).rows;
    expect(stamps).toHaveLength(2);
    for (const s of stamps) expect(micros(s.t)).toBeGreaterThanOrEqual(meanwhile);
    expect(stamps[0].t).toBe(stamps[1].t);
  });

  it("stamps each transaction of a session afresh (the per-transaction instant does not leak)", async () => {
    const org = await createTestOrganization(pool);
    const client = new Client({ connectionString: testDatabaseUrl(), application_name: "pooled-writer" });
    await client.connect();
    sessions.push(client);
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) {
      await client.query("BEGIN");
      await client.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'x')", [org, id]);
      await client.query("COMMIT");
      await pause(5);
    }
    const { rows } = await pool.query<{ id: string; t: Date }>("SELECT id, last_modified AS t FROM suppliers WHERE organization_id = $1", [org]);
    const at = (id: string) => rows.find((r) => r.id === id)!.t.getTime();
    expect(at(ids[1])).toBeGreaterThan(at(ids[0]));
  });

  it("leaves stamps from before the transaction (a backfill) and unchanged stamps alone", async () => {
    const org = await createTestOrganization(pool);
    const id = randomUUID();
    await pool.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'old', '2020-01-01T00:00:00Z')", [org, id]);
    await pool.query("UPDATE suppliers SET name = 'renamed' WHERE organization_id = $1 AND id = $2", [org, id]);
    const { rows } = await pool.query<{ t: Date }>("SELECT last_modified AS t FROM suppliers WHERE organization_id = $1", [org]);
    expect(rows[0].t.toISOString()).toBe("2020-01-01T00:00:00.000Z");
  });

  it("never goes back below the floor a listing raised, when a long reader turns into a writer", async () => {
    const org = await createTestOrganization(pool);
    const lateWriter = await openTransaction();
    await lateWriter.client.query("SELECT 1");
    await pause(30);
    const listed = await listingHorizon(pool, org, []);
    expect(listed.horizonMicros).toBeGreaterThan(lateWriter.started);
    await lateWriter.client.query("SELECT pg_current_xact_id()"); // now a writer whose xact_start is older than the floor
    const page = await pageHorizon(pool, org, null);
    expect(page.undeclaredWriterSince).toBe(lateWriter.started);
    expect(page.visibleBeforeMicros).toBe(listed.horizonMicros);
    // ...and what it writes is stamped after the floor.
    const id = randomUUID();
    await lateWriter.client.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'late')", [org, id]);
    await lateWriter.end();
    const { rows } = await pool.query<{ t: string }>("SELECT (extract(epoch FROM last_modified) * 1000000)::bigint::text AS t FROM suppliers WHERE id = $1", [id]);
    expect(micros(rows[0].t)).toBeGreaterThanOrEqual(listed.horizonMicros);
  });

  it("writes the floor only while an older reader is open, at most about once a second", async () => {
    const org = await createTestOrganization(pool);
    const floors = async () => (await pool.query("SELECT horizon FROM export_visibility_floors WHERE organization_id = $1", [org])).rowCount;
    await listingHorizon(pool, org, []);
    expect(await floors()).toBe(0); // nothing can lower the horizon later: no write
    const reader = await openTransaction();
    await reader.client.query("SELECT 1");
    await pause(5);
    const first = await listingHorizon(pool, org, []);
    expect(await floors()).toBe(1);
    const second = await listingHorizon(pool, org, []);
    // Within a second of the stored floor the tokens use it as stored (a little lower: safe).
    if (second.nowMicros - first.horizonMicros < 1_000_000n) expect(second.horizonMicros).toBe(first.horizonMicros);
    else expect(second.horizonMicros).toBeGreaterThan(first.horizonMicros);
    await reader.end();
    expect((await listingHorizon(pool, org, [])).horizonMicros).toBeGreaterThan(first.horizonMicros);
  });

  it("a form dataset's horizon is lowered to its oldest unapplied source change (and only its form's)", async () => {
    const org = await createTestOrganization(pool);
    const [form, otherForm] = [randomUUID(), randomUUID()];
    await pool.query(
      `INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id, source_last_modified)
       VALUES ($1, 'submission', $2, $3, now() - interval '1 hour'), ($1, 'submission', $2, $3, now() - interval '2 hours')`,
      [org, form, randomUUID()],
    );
    const oldest: Micros = micros(
      (await pool.query<{ t: string }>("SELECT (extract(epoch FROM min(source_last_modified)) * 1000000)::bigint::text AS t FROM form_dataset_changes WHERE organization_id = $1", [org])).rows[0].t,
    );
    expect((await pageHorizon(pool, org, form)).visibleBeforeMicros).toBe(oldest);
    expect((await pageHorizon(pool, org, form)).pendingSince).toBe(oldest);
    expect((await pageHorizon(pool, org, otherForm)).visibleBeforeMicros).toBeGreaterThan(oldest);
    const listed = await listingHorizon(pool, org, [form, otherForm]);
    expect(listed.pendingByForm.get(form)).toBe(oldest);
    expect(listed.pendingByForm.has(otherForm)).toBe(false);
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  });
});
