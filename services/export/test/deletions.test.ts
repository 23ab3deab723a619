import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { pruneTombstones } from "@exportsvc/datasets";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import {
  callError,
  deletionsPage,
  exportPage,
  registerFixedDataset,
  startExport,
  upsertRegistry,
  type ExportHarness,
  type Page,
} from "./support";

let pool: Pool;
let harness: ExportHarness;

beforeAll(async () => {
  pool = testPool();
  harness = await startExport();
});

afterAll(async () => {
  await harness.stop();
  await pool.end();
});

const DATE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00$/;

async function supplierOrganization(names: string[]): Promise<{ org: string; ids: string[] }> {
  const org = await createTestOrganization(pool);
  await registerFixedDataset(pool, org, "resources_suppliers");
  await registerFixedDataset(pool, org, "resources_customers");
  const ids = names.map(() => randomUUID());
  for (const [i, name] of names.entries()) {
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, $3)", [org, ids[i], name]);
  }
  return { org, ids };
}

const deleteSupplier = (org: string, id: string, db: Pick<Pool, "query"> = pool) =>
  db.query("DELETE FROM suppliers WHERE organization_id = $1 AND id = $2", [org, id]);

/** An organization with a form registered as dataset `audit` (grid `audit__rows`) and `n` submissions. */
async function formOrganization(n: number): Promise<{ org: string; formId: string; subs: string[] }> {
  const org = await createTestOrganization(pool);
  const formId = randomUUID();
  await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [org, formId]);
  await upsertRegistry(pool, org, { key: "audit", kind: "submission", sourceRef: formId, columns: [], tableName: "form_ds.none" });
  await upsertRegistry(pool, org, { key: "audit__rows", kind: "grid", sourceRef: `${formId}/${randomUUID()}`, columns: [], tableName: "form_ds.none", parentKey: "audit" });
  const subs = Array.from({ length: n }, () => randomUUID());
  for (const [i, id] of subs.entries()) {
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, $2, $3, $4)", [org, id, formId, `AU-${i + 1}`]);
  }
  return { org, formId, subs };
}

const deleteSubmission = (org: string, id: string, db: Pick<Pool, "query"> = pool) =>
  db.query("DELETE FROM submissions WHERE organization_id = $1 AND id = $2", [org, id]);

/** What the schema service's form maintenance does with the change log (none runs in these tests). */
const consumeFormChanges = (org: string) => pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);

/** The loop of docs/contract.md §4 over the deletion feed. */
async function allDeletions(org: string, datasetKey: string, limit: number, cursor?: string): Promise<Page["rows"]> {
  const rows: Page["rows"] = [];
  for (let i = 0; i < 100; i++) {
    const page = await deletionsPage(harness.client, { organizationId: org, datasetKey, limit, cursor });
    rows.push(...page.rows);
    if (page.rows.length < limit) return rows;
    cursor = page.rows[page.rows.length - 1]._cursor;
  }
  throw new Error("paging did not end");
}

describe("deletion feed", () => {
  it("lists each deleted row once with id, deleted_at and _cursor, oldest first; the CSV no longer has it", async () => {
    const { org, ids } = await supplierOrganization(["A", "B", "C", "D"]);
    await deleteSupplier(org, ids[2]);
    await pool.query("DELETE FROM suppliers WHERE organization_id = $1 AND id = ANY($2::uuid[])", [org, [ids[0], ids[3]]]);
    const page = await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" });
    expect(page.header).toEqual(["id", "deleted_at", "_cursor"]);
    expect(page.rows).toHaveLength(3);
    expect(page.rows[0].id).toBe(ids[2]);
    expect(new Set(page.rows.slice(1).map((r) => r.id))).toEqual(new Set([ids[0], ids[3]]));
    for (const r of page.rows) expect(r.deleted_at).toMatch(DATE_TIME);
    const order = page.rows.map((r) => [r.deleted_at, r.id].join(" "));
    expect(order).toEqual([...order].sort());
    // Paged one at a time with the cursor: the same rows, each once.
    expect((await allDeletions(org, "resources_suppliers", 1)).map((r) => r.id)).toEqual(page.rows.map((r) => r.id));
    const csv = await exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" });
    expect(csv.rows.map((r) => r.id)).toEqual([ids[1]]);
    // Other datasets' feeds are untouched.
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_customers" })).rows).toEqual([]);
  });

  it("writes the tombstone in the deleting transaction: a rolled-back delete leaves none", async () => {
    const { org, ids } = await supplierOrganization(["A"]);
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await deleteSupplier(org, ids[0], client);
      expect((await client.query("SELECT count(*)::int AS n FROM dataset_tombstones WHERE organization_id = $1", [org])).rows[0].n).toBe(1);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    expect((await pool.query("SELECT count(*)::int AS n FROM dataset_tombstones WHERE organization_id = $1", [org])).rows[0].n).toBe(0);
  });

  it("a tombstone that commits late arrives behind a held deletions cursor, not lost", async () => {
    // Submission deletes of one form do not serialize on a shared row, so they can commit out of order.
    const { org, subs } = await formOrganization(3);
    await deleteSubmission(org, subs[0]);
    await consumeFormChanges(org);
    const held = (await deletionsPage(harness.client, { organizationId: org, datasetKey: "audit" })).rows.at(-1)!._cursor;
    const late = new Client({ connectionString: testDatabaseUrl(), application_name: "late-writer" });
    await late.connect();
    try {
      await late.query("BEGIN");
      await deleteSubmission(org, subs[1], late);
      // A later delete commits first; the open transaction's tombstone sorts before it.
      await deleteSubmission(org, subs[2]);
      await consumeFormChanges(org); // only the committed change: the open transaction's is invisible to it
      const during = await deletionsPage(harness.client, { organizationId: org, datasetKey: "audit", cursor: held });
      expect(during.rows).toEqual([]);
      await late.query("COMMIT");
    } finally {
      await late.end();
    }
    await consumeFormChanges(org);
    const after = await deletionsPage(harness.client, { organizationId: org, datasetKey: "audit", cursor: held });
    expect(after.rows.map((r) => r.id)).toEqual([subs[1], subs[2]]);
  });

  it("a row re-created before its tombstone (a writer holding an earlier stamp) does not get that tombstone while it exists", async () => {
    const { org, ids } = await supplierOrganization(["A", "B", "C"]);
    const [recreated, deleted, other] = ids;
    const customer = randomUUID();
    await pool.query("INSERT INTO customers (organization_id, id, name) VALUES ($1, $2, 'Customer')", [org, customer]);
    // A loader stamping rows with its transaction's time: its first write fixes the stamp. (A write of a
    // supplier, or a rename, would serialize the delete below behind it on a shared counter row.)
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "transaction-time-writer" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("UPDATE customers SET attributes = '{}', last_modified = now() WHERE organization_id = $1 AND id = $2", [org, customer]);
      // Meanwhile another session deletes two suppliers and commits.
      await deleteSupplier(org, recreated);
      await deleteSupplier(org, deleted);
      await writer.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'A again', now())", [org, recreated]);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    const stamps = await pool.query<{ stamped_before: boolean }>(
      `SELECT s.last_modified < t.deleted_at AS stamped_before FROM suppliers s
         JOIN dataset_tombstones t ON t.organization_id = s.organization_id AND t.id = s.id WHERE s.organization_id = $1`,
      [org],
    );
    expect(stamps.rows).toEqual([{ stamped_before: true }]); // the case: the client's rule alone would delete it

    // Served, the tombstone would delete the re-created row from every copy holding it.
    expect((await allDeletions(org, "resources_suppliers", 5000)).map((r) => r.id)).toEqual([deleted]);
    // Left out inside the page window: a page of 1 still holds the next tombstone.
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", limit: 1 })).rows.map((r) => r.id)).toEqual([deleted]);
    expect((await exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows.map((r) => r.id).sort()).toEqual([recreated, other].sort());

    // Re-stamped after its tombstone, it still exists: the tombstone stays unserved (see the next test).
    await pool.query("UPDATE suppliers SET name = 'A3', last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $2", [org, recreated]);
    expect((await allDeletions(org, "resources_suppliers", 5000)).map((r) => r.id)).toEqual([deleted]);
    // Deleted again, both its tombstones are served.
    await deleteSupplier(org, recreated);
    expect((await allDeletions(org, "resources_suppliers", 5000)).map((r) => r.id)).toEqual([recreated, deleted, recreated]);
  });

  it("a consumer following the documented rule never ends with a re-created row deleted: re-stamped between its rows pass and its feed pass", async () => {
    const { org, ids } = await supplierOrganization(["A", "B"]);
    const [recreated, other] = ids;
    const customer = randomUUID();
    await pool.query("INSERT INTO customers (organization_id, id, name) VALUES ($1, $2, 'Customer')", [org, customer]);
    // T2: a writer whose stamp (its first write) predates the tombstone of T1's delete.
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "transaction-time-writer" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("UPDATE customers SET attributes = '{}', last_modified = now() WHERE organization_id = $1 AND id = $2", [org, customer]);
      await deleteSupplier(org, recreated); // T1 commits the tombstone
      await writer.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'A again', now())", [org, recreated]);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    // The consumer's rows pass: its copy holds the re-created row, stamped before the tombstone.
    const copy = new Map<string, string>();
    for (const row of (await exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows) copy.set(row.id, row.last_modified);
    expect([...copy.keys()].sort()).toEqual([recreated, other].sort());
    // Then, before its feed pass, the row is edited (re-stamped after the tombstone) and commits.
    await pool.query("UPDATE suppliers SET name = 'A edited', last_modified = now() WHERE organization_id = $1 AND id = $2", [org, recreated]);
    // The feed pass with the documented rule: delete only when deleted_at is newer than the stored last_modified.
    const micros = (text: string) => BigInt(Date.parse(text.replace(" ", "T").replace(/\.\d+/, "").replace(/\+00$/, "Z"))) * 1000n + BigInt((text.match(/\.(\d+)/)?.[1] ?? "").padEnd(6, "0"));
    for (const t of await allDeletions(org, "resources_suppliers", 5000)) {
      const stored = copy.get(t.id);
      if (stored !== undefined && micros(t.deleted_at) > micros(stored)) copy.delete(t.id);
    }
    // The source has the row: so must the copy.
    expect(copy.has(recreated)).toBe(true);
  });

  it("a submission re-created in its form before its tombstone keeps the form's feeds from serving it; in another form it does not", async () => {
    const { org, formId, subs } = await formOrganization(2);
    const otherForm = randomUUID();
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Other', 'OT')", [org, otherForm]);
    await consumeFormChanges(org);
    await deleteSubmission(org, subs[0]);
    await deleteSubmission(org, subs[1]);
    // Re-created with an explicit stamp older than their tombstones: one in its form, one in another.
    const stampedBefore = "2020-01-01T00:00:00Z";
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, last_modified) VALUES ($1, $2, $3, 'AU-1', $4)", [org, subs[0], formId, stampedBefore]);
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, last_modified) VALUES ($1, $2, $3, 'OT-1', $4)", [org, subs[1], otherForm, stampedBefore]);
    await consumeFormChanges(org);
    for (const key of ["audit", "audit__rows"]) {
      expect((await allDeletions(org, key, 5000)).map((r) => r.id)).toEqual([subs[1]]);
    }
    // Deleted again: its first tombstone is served (the rule then deletes what the copy holds), and the second.
    await deleteSubmission(org, subs[0]);
    await consumeFormChanges(org);
    expect((await allDeletions(org, "audit", 5000)).map((r) => r.id)).toEqual([subs[0], subs[1], subs[0]]);
  });

  it("keeps organizations apart: another organization's deletions never show, its cursor is altered", async () => {
    const a = await supplierOrganization(["A"]);
    const b = await supplierOrganization(["B"]);
    await deleteSupplier(a.org, a.ids[0]);
    await deleteSupplier(b.org, b.ids[0]);
    const pageA = await deletionsPage(harness.client, { organizationId: a.org, datasetKey: "resources_suppliers" });
    const pageB = await deletionsPage(harness.client, { organizationId: b.org, datasetKey: "resources_suppliers" });
    expect(pageA.rows.map((r) => r.id)).toEqual([a.ids[0]]);
    expect(pageB.rows.map((r) => r.id)).toEqual([b.ids[0]]);
    const err = await callError(() => deletionsPage(harness.client, { organizationId: b.org, datasetKey: "resources_suppliers", cursor: pageA.rows[0]._cursor }));
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: "altered" } });
  });

  it("a CSV cursor is refused by the feed and a deletions cursor by the CSV endpoint (other_feed)", async () => {
    const { org, ids } = await supplierOrganization(["A", "B"]);
    await deleteSupplier(org, ids[0]);
    const csvCursor = (await exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows[0]._cursor;
    const delCursor = (await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows[0]._cursor;
    const onFeed = await callError(() => deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", cursor: csvCursor }));
    expect(onFeed).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: "other_feed" } });
    const onCsv = await callError(() => exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", cursor: delCursor }));
    expect(onCsv).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: "other_feed" } });
    const onOther = await callError(() => deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_customers", cursor: delCursor }));
    expect(onOther.extensions?.cursorProblem).toBe("other_dataset");
  });

  it("same limit rules as the CSV endpoint; unknown dataset is 404", async () => {
    const { org } = await supplierOrganization([]);
    for (const limit of [0, 5001]) {
      const err = await callError(() => deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", limit }));
      expect(err).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
    }
    const missing = await callError(() => deletionsPage(harness.client, { organizationId: org, datasetKey: "no_such_dataset" }));
    expect(missing).toMatchObject({ status: 404, errorCode: "DATASET_NOT_FOUND" });
  });

  it("retention: pruning old tombstones expires only cursors positioned before a pruned one (410 DELETIONS_CURSOR_EXPIRED)", async () => {
    const { org } = await supplierOrganization([]);
    const old = [randomUUID(), randomUUID()];
    const recent = randomUUID();
    await pool.query(
      `INSERT INTO dataset_tombstones (organization_id, scope, id, deleted_at) VALUES
         ($1, 'suppliers', $2, now() - interval '50 days'), ($1, 'suppliers', $3, now() - interval '40 days'), ($1, 'suppliers', $4, now() - interval '1 day')`,
      [org, old[0], old[1], recent],
    );
    const before = (await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows;
    expect(before.map((r) => r.id)).toEqual([...old, recent]);
    expect(await pruneTombstones(pool, 35)).toBeGreaterThanOrEqual(2);
    const expired = await callError(() => deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", cursor: before[0]._cursor }));
    expect(expired).toMatchObject({ status: 410, errorCode: "DELETIONS_CURSOR_EXPIRED" });
    // At the newest pruned tombstone nothing was lost: the cursor still works.
    const atWatermark = await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", cursor: before[1]._cursor });
    expect(atWatermark.rows.map((r) => r.id)).toEqual([recent]);
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers" })).rows.map((r) => r.id)).toEqual([recent]);
  });

  it("a deleted submission reaches its form's submission and grid feeds; its deviations reach the deviations feed; a frozen form gets none", async () => {
    const { org, formId, subs } = await formOrganization(2);
    await registerFixedDataset(pool, org, "deviations");
    const deviation = randomUUID();
    await pool.query("INSERT INTO deviations (organization_id, id, code, submission_id, severity) VALUES ($1, $2, 'DEV-1', $3, 'Low')", [org, deviation, subs[0]]);
    await consumeFormChanges(org);
    await deleteSubmission(org, subs[0]);
    // Held back while the materialized table may still hold the row (its change is pending).
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "audit" })).rows).toEqual([]);
    await consumeFormChanges(org);
    for (const key of ["audit", "audit__rows"]) {
      expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: key })).rows.map((r) => r.id)).toEqual([subs[0]]);
    }
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "deviations" })).rows.map((r) => r.id)).toEqual([deviation]);
    // A deleted form's datasets are frozen (they keep their rows), so nothing leaves them.
    await pool.query("UPDATE forms SET deleted_at = now() WHERE organization_id = $1 AND id = $2", [org, formId]);
    await deleteSubmission(org, subs[1]);
    await consumeFormChanges(org);
    expect((await deletionsPage(harness.client, { organizationId: org, datasetKey: "audit" })).rows.map((r) => r.id)).toEqual([subs[0]]);
  });
});
