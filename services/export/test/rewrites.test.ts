import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { pruneRewrites } from "@exportsvc/datasets";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { callError, deletionsPage, exportPage, registerFixedDataset, rewritesPage, startExport, type ExportHarness, type Page } from "./support";

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

/** An organization with two sites, equipment at each, a lot at the first, a supplier and a deviation. */
async function siteOrganization() {
  const org = await createTestOrganization(pool);
  for (const key of ["resources_equipment", "resources_lots", "resources_customers", "resources_products", "deviations"]) await registerFixedDataset(pool, org, key);
  const [siteA, siteB, eqA1, eqA2, eqB, lot, product] = Array.from({ length: 7 }, () => randomUUID());
  await pool.query("INSERT INTO sites (organization_id, id, name) VALUES ($1, $2, 'Plant A'), ($1, $3, 'Plant B')", [org, siteA, siteB]);
  await pool.query("INSERT INTO equipment (organization_id, id, name, site_id) VALUES ($1, $2, 'Mixer', $5), ($1, $3, 'Oven', $5), ($1, $4, 'Press', $6)", [
    org, eqA1, eqA2, eqB, siteA, siteB,
  ]);
  await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]);
  await pool.query("INSERT INTO lots (organization_id, id, code, site_id, product_id) VALUES ($1, $2, 'L-1', $3, $4)", [org, lot, siteA, product]);
  return { org, siteA, siteB, eqA1, eqA2, eqB, lot, product };
}

const renameSite = (org: string, site: string, name: string, db: Pick<Pool, "query"> = pool) =>
  db.query("UPDATE sites SET name = $3 WHERE organization_id = $1 AND id = $2", [org, site, name]);

async function allRewrites(org: string, datasetKey: string, limit: number, cursor?: string): Promise<Page["rows"]> {
  const rows: Page["rows"] = [];
  for (let i = 0; i < 100; i++) {
    const page = await rewritesPage(harness.client, { organizationId: org, datasetKey, limit, cursor });
    rows.push(...page.rows);
    if (page.rows.length < limit) return rows;
    cursor = page.rows[page.rows.length - 1]._cursor;
  }
  throw new Error("paging did not end");
}

const withoutCursor = ({ _cursor, ...row }: Record<string, string>) => row;

describe("rewrite feed", () => {
  it("serves exactly the rows a site rename rewrote, with the CSV page's columns and current text; other datasets get nothing", async () => {
    const o = await siteOrganization();
    await renameSite(o.org, o.siteA, "Plant A (north)");
    const page = await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" });
    const csv = await exportPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" });
    expect(page.header).toEqual(csv.header);
    expect(page.rows.map((r) => r.id).sort()).toEqual([o.eqA1, o.eqA2].sort());
    for (const row of page.rows) {
      expect(row.site_name).toBe("Plant A (north)");
      expect(withoutCursor(row)).toEqual(withoutCursor(csv.rows.find((r) => r.id === row.id)!));
    }
    expect((await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_lots" })).rows.map((r) => [r.id, r.site_name])).toEqual([[o.lot, "Plant A (north)"]]);
    // Datasets that do not show the site are untouched.
    expect((await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_customers" })).rows).toEqual([]);
    expect((await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_products" })).rows).toEqual([]);
    // A write that leaves the displayed columns as they were rewrites nothing.
    await pool.query("UPDATE sites SET last_modified = now() WHERE organization_id = $1 AND id = $2", [o.org, o.siteB]);
    expect((await allRewrites(o.org, "resources_equipment", 5000)).map((r) => r.id).sort()).toEqual([o.eqA1, o.eqA2].sort());
  });

  it("a row rewritten several times appears once, at its latest rewrite and with its latest text; the cursor resumes after it", async () => {
    const o = await siteOrganization();
    await renameSite(o.org, o.siteA, "A1");
    const first = await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_lots" });
    expect(first.rows.map((r) => r.site_name)).toEqual(["A1"]);
    await renameSite(o.org, o.siteA, "A2");
    await renameSite(o.org, o.siteA, "A3");
    await pool.query("UPDATE products SET name = 'Rye flour' WHERE organization_id = $1 AND id = $2", [o.org, o.product]);
    const all = await allRewrites(o.org, "resources_lots", 5000);
    expect(all.map((r) => [r.id, r.site_name, r.product_name])).toEqual([[o.lot, "A3", "Rye flour"]]);
    const after = await allRewrites(o.org, "resources_lots", 1, first.rows[0]._cursor);
    expect(after.map((r) => [r.id, r.site_name, r.product_name])).toEqual([[o.lot, "A3", "Rye flour"]]);
    expect(await allRewrites(o.org, "resources_lots", 5000, after[0]._cursor)).toEqual([]);
  });

  it("deleting a named record and inserting one under an id rows already name rewrite those rows; a deleted row is not served (its tombstone is)", async () => {
    const o = await siteOrganization();
    await pool.query("DELETE FROM sites WHERE organization_id = $1 AND id = $2", [o.org, o.siteB]);
    let rows = await allRewrites(o.org, "resources_equipment", 5000);
    expect(rows.map((r) => [r.id, r.site_name])).toEqual([[o.eqB, ""]]);
    await pool.query("INSERT INTO sites (organization_id, id, name) VALUES ($1, $2, 'Plant B again')", [o.org, o.siteB]);
    rows = await allRewrites(o.org, "resources_equipment", 5000);
    expect(rows.map((r) => [r.id, r.site_name])).toEqual([[o.eqB, "Plant B again"]]);
    await pool.query("DELETE FROM equipment WHERE organization_id = $1 AND id = $2", [o.org, o.eqB]);
    expect(await allRewrites(o.org, "resources_equipment", 5000)).toEqual([]);
    expect((await deletionsPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" })).rows.map((r) => r.id)).toEqual([o.eqB]);
  });

  it("an employee rename reaches the deviations that show the employee, through the deviations feed", async () => {
    const o = await siteOrganization();
    const [employee, shown, other] = [randomUUID(), randomUUID(), randomUUID()];
    await pool.query("INSERT INTO employees (organization_id, id, first_name, last_name) VALUES ($1, $2, 'Ada', 'Lovelace')", [o.org, employee]);
    const sub = randomUUID();
    const form = randomUUID();
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [o.org, form]);
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, $2, $3, 'AU-1')", [o.org, sub, form]);
    await pool.query(
      "INSERT INTO deviations (organization_id, id, code, submission_id, severity, assigned_user_id) VALUES ($1, $2, 'D-1', $4, 'Low', $5), ($1, $3, 'D-2', $4, 'Low', NULL)",
      [o.org, shown, other, sub, employee],
    );
    const cursor = (await allRewrites(o.org, "deviations", 5000)).at(-1)?._cursor;
    await pool.query("UPDATE employees SET last_name = 'King' WHERE organization_id = $1 AND id = $2", [o.org, employee]);
    const rows = await allRewrites(o.org, "deviations", 5000, cursor);
    expect(rows.map((r) => [r.id, r.assigned_user_name])).toEqual([[shown, "Ada King"]]);
  });

  it("expands an entry to exactly the rows of the dataset and organization that show the record, through link tables and borrowed columns", async () => {
    const o = await siteOrganization();
    const [supplier, otherProduct, form, sub, linking, dev1, dev2, dev3] = Array.from({ length: 8 }, () => randomUUID());
    await registerFixedDataset(pool, o.org, "resources_suppliers");
    await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Salt')", [o.org, otherProduct]);
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [o.org, supplier]);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [o.org, supplier, o.product]);
    await pool.query("INSERT INTO product_sites (organization_id, product_id, site_id) VALUES ($1, $2, $3)", [o.org, otherProduct, o.siteB]);
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [o.org, form]);
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, site_id) VALUES ($1, $2, $3, 'AU-1', $4), ($1, $5, $3, 'AU-2', NULL)", [o.org, sub, form, o.siteB, linking]);
    await pool.query(
      "INSERT INTO deviations (organization_id, id, code, submission_id, severity, linked_record_id) VALUES ($1, $2, 'D-1', $5, 'Low', NULL), ($1, $3, 'D-2', $6, 'Low', $5), ($1, $4, 'D-3', $6, 'Low', NULL)",
      [o.org, dev1, dev2, dev3, sub, linking],
    );
    const cursors = new Map<string, string | undefined>();
    for (const key of ["resources_products", "resources_suppliers", "deviations", "resources_equipment"]) cursors.set(key, (await allRewrites(o.org, key, 5000)).at(-1)?._cursor);
    const since = async (key: string) => (await allRewrites(o.org, key, 5000, cursors.get(key))).map((r) => r.id).sort();

    await pool.query("UPDATE products SET name = 'Rye' WHERE organization_id = $1 AND id = $2", [o.org, o.product]);
    expect(await since("resources_suppliers")).toEqual([supplier]);
    await renameSite(o.org, o.siteB, "Plant B2");
    // The product linked to site B (product_sites), the deviation of the submission at site B, the equipment at B.
    expect(await since("resources_products")).toEqual([otherProduct]);
    expect(await since("deviations")).toEqual([dev1]);
    expect(await since("resources_equipment")).toEqual([o.eqB]);
    // The form's name: the deviations of its submissions and the one linking to one of them.
    await pool.query("UPDATE forms SET name = 'Hygiene' WHERE organization_id = $1 AND id = $2", [o.org, form]);
    expect(await since("deviations")).toEqual([dev1, dev2, dev3].sort());
  });

  it("a group larger than a page is served across pages in id order, each row once; a cursor at a group's last row resumes at the next group", async () => {
    const o = await siteOrganization();
    await pool.query("INSERT INTO equipment (organization_id, id, name, site_id) SELECT $1, gen_random_uuid(), 'E' || g, $2 FROM generate_series(1, 9) g", [o.org, o.siteA]);
    await renameSite(o.org, o.siteA, "A big");
    const paged = await allRewrites(o.org, "resources_equipment", 4);
    const ids = paged.map((r) => r.id);
    expect(ids).toHaveLength(11);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(11);
    expect(paged.every((r) => r.site_name === "A big")).toBe(true);
    const end = paged.at(-1)!._cursor;
    expect(await allRewrites(o.org, "resources_equipment", 4, end)).toEqual([]);
    // Resumed inside the group: the rest of it only.
    expect((await allRewrites(o.org, "resources_equipment", 4, paged[5]._cursor)).map((r) => r.id)).toEqual(ids.slice(6));
    await renameSite(o.org, o.siteB, "B next");
    expect((await allRewrites(o.org, "resources_equipment", 4, end)).map((r) => r.id)).toEqual([o.eqB]);
    // A later rename of site A serves its rows again, once, at the later group.
    await renameSite(o.org, o.siteA, "A again");
    const again = await allRewrites(o.org, "resources_equipment", 5000, end);
    expect(again.map((r) => r.id)).toEqual([o.eqB, ...ids]);
  });

  it("a rewrite that commits late arrives behind a held rewrites cursor, not lost", async () => {
    const o = await siteOrganization();
    await renameSite(o.org, o.siteB, "B1");
    let cursor = (await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" })).rows.at(-1)!._cursor;
    const seen: Array<[string, string]> = [];
    const late = new Client({ connectionString: testDatabaseUrl(), application_name: "late-renamer" });
    await late.connect();
    try {
      await late.query("BEGIN");
      // What a renaming statement's trigger writes first (its datasets' changeTokens come after, so a
      // concurrent rename can log, bump and commit in between): one entry for the record.
      await late.query("INSERT INTO dataset_rewrite_log (organization_id, kind, record_id) VALUES ($1, 'sites', $2)", [o.org, o.siteA]);
      await renameSite(o.org, o.siteB, "B2"); // logged after the open entry, committed first
      const during = await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", cursor });
      seen.push(...during.rows.map((r): [string, string] => [r.id, r.site_name]));
      cursor = during.rows.at(-1)?._cursor ?? cursor;
      await late.query("COMMIT");
    } finally {
      await late.end();
    }
    // The client's loop, resumed from the cursor it stored: the late entry is not behind it.
    seen.push(...(await allRewrites(o.org, "resources_equipment", 5000, cursor)).map((r): [string, string] => [r.id, r.site_name]));
    // The late entry's group (site A's rows, in id order), then the rename of B that committed first.
    expect(seen).toEqual([
      ...[o.eqA1, o.eqA2].sort().map((id): [string, string] => [id, "Plant A"]),
      [o.eqB, "B2"],
    ]);
  });

  it("keeps organizations apart: another organization's rewrites never show, its cursor is altered", async () => {
    const a = await siteOrganization();
    const b = await siteOrganization();
    // The same site id in both organizations: only the renaming organization's rows are rewritten.
    await pool.query("UPDATE equipment SET site_id = $2 WHERE organization_id = $1", [b.org, a.siteA]);
    await pool.query("INSERT INTO sites (organization_id, id, name) VALUES ($1, $2, 'B copy')", [b.org, a.siteA]);
    const bBefore = (await allRewrites(b.org, "resources_equipment", 5000)).map((r) => r.id);
    await renameSite(a.org, a.siteA, "Renamed in A");
    const pageA = await allRewrites(a.org, "resources_equipment", 5000);
    expect(pageA.map((r) => r.id).sort()).toEqual([a.eqA1, a.eqA2].sort());
    expect((await allRewrites(b.org, "resources_equipment", 5000)).map((r) => r.id)).toEqual(bBefore);
    const err = await callError(() => rewritesPage(harness.client, { organizationId: b.org, datasetKey: "resources_equipment", cursor: pageA[0]._cursor }));
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: "altered" } });
  });

  it("takes only its own cursors (other_feed both ways) and the CSV endpoint's limit rules", async () => {
    const o = await siteOrganization();
    await renameSite(o.org, o.siteA, "X");
    const csvCursor = (await exportPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" })).rows[0]._cursor;
    const rwCursor = (await rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment" })).rows[0]._cursor;
    for (const [call, problem] of [
      [() => rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", cursor: csvCursor }), "other_feed"],
      [() => exportPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", cursor: rwCursor }), "other_feed"],
      [() => deletionsPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", cursor: rwCursor }), "other_feed"],
      [() => rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_lots", cursor: rwCursor }), "other_dataset"],
    ] as const) {
      expect(await callError(call)).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: problem } });
    }
    for (const limit of [0, 5001]) {
      expect(await callError(() => rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", limit }))).toMatchObject({
        status: 400,
        errorCode: "INVALID_PARAMETER",
      });
    }
    expect(await callError(() => rewritesPage(harness.client, { organizationId: o.org, datasetKey: "no_such_dataset" }))).toMatchObject({ status: 404 });
  });

  it("retention: pruning old entries expires only cursors positioned before or inside a pruned group (400 REWRITES_CURSOR_EXPIRED)", async () => {
    const o = await siteOrganization();
    const [siteC, eqC] = [randomUUID(), randomUUID()];
    await pool.query("INSERT INTO sites (organization_id, id, name) VALUES ($1, $2, 'Plant C')", [o.org, siteC]);
    await pool.query("INSERT INTO equipment (organization_id, id, name, site_id) VALUES ($1, $2, 'Kiln', $3)", [o.org, eqC, siteC]);
    await pool.query(
      `INSERT INTO dataset_rewrite_log (organization_id, kind, record_id, rewritten_at) VALUES
         ($1, 'sites', $2, now() - interval '50 days'), ($1, 'sites', $3, now() - interval '40 days'), ($1, 'sites', $4, now() - interval '1 day')`,
      [o.org, o.siteB, o.siteA, siteC],
    );
    const before = await allRewrites(o.org, "resources_equipment", 5000);
    expect(before.map((r) => r.id)).toEqual([o.eqB, ...[o.eqA1, o.eqA2].sort(), eqC]);
    expect(await pruneRewrites(pool, 35)).toBeGreaterThanOrEqual(2);
    // Before the pruned groups, or inside the last pruned one: rows were lost.
    for (const cursor of [before[0]._cursor, before[1]._cursor]) {
      const expired = await callError(() => rewritesPage(harness.client, { organizationId: o.org, datasetKey: "resources_equipment", cursor }));
      expect(expired).toMatchObject({ status: 400, errorCode: "REWRITES_CURSOR_EXPIRED" });
    }
    // At the end of the last pruned group: nothing lost.
    expect((await allRewrites(o.org, "resources_equipment", 5000, before[2]._cursor)).map((r) => r.id)).toEqual([eqC]);
  });
});
