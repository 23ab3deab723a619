/**
 * Precise rewrites (migration 120): a change that rewrites rows' exported text without moving their
 * last_modified logs one entry per changed record (its kind and id; the feed expands it to rows when
 * read, services/export/test/rewrites.test.ts) and moves the changeToken of the datasets whose feeds
 * show that kind; no rewriteToken moves. Relations and borrowed columns (105), named records renamed,
 * deleted or inserted while rows already name their id (046, 110), a deviation's standalone comment
 * written without a last_modified move (111).
 */
import { randomUUID } from "node:crypto";
import { RESOURCE_CORE_EXPRESSIONS, RESOURCE_TABLES, REWRITE_REFERENCES, type ResourceKind } from "@exportsvc/datasets";
import { DEVIATION_JOINS } from "../../../packages/datasets/src/sql/deviations";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { collectListing, startCatalogHarness, type CatalogHarness } from "./support";

/** The feeds (REWRITE_REFERENCES) whose rows can show a record of this kind. */
const feedsOf = (kind: string) => Object.keys(REWRITE_REFERENCES).filter((f) => REWRITE_REFERENCES[f].some((r) => r.kind === kind));
/** The fixed datasets of those feeds (form datasets are not registered in these tests). */
const datasetsOfKind = (kind: string) => feedsOf(kind).flatMap((f) => (f === "deviations" ? ["deviations"] : f === "form" || f === "grid" ? [] : [`resources_${f}`]));

describe("precise rewrites: the records each change logs (migration 120)", () => {
  const pool = testPool();
  let harness: CatalogHarness;
  const tokens = async (org: string) =>
    new Map((await collectListing(harness.client, { organizationId: org })).datasets.map((d) => [d.key, `${d.changeToken} ${d.rewriteToken}`]));
  const rewriteTokens = async (org: string) =>
    new Map((await collectListing(harness.client, { organizationId: org })).datasets.map((d) => [d.key, d.rewriteToken]));
  /** The keys whose token differs between two listings. */
  const moved = (before: Map<string, string | undefined>, after: Map<string, string | undefined>) => [...after.keys()].filter((k) => after.get(k) !== before.get(k)).sort();
  const logged = async (org: string) =>
    (await pool.query<{ e: string }>("SELECT kind || ' ' || record_id AS e FROM dataset_rewrite_log WHERE organization_id = $1 ORDER BY seq", [org])).rows.map((r) => r.e);
  /**
   * Runs the step and answers which records it logged ("<kind> <id>", deduplicated, sorted); checks
   * that no rewriteToken moved and that the changeToken moved exactly for the registered datasets whose
   * feeds show those kinds and those the step wrote rows of itself (`written`).
   */
  const rewrittenBy = async (org: string, step: () => Promise<unknown>, written: string[] = [], datasetsOf: (kind: string) => string[] = datasetsOfKind) => {
    const [before, rewrites, already] = [await tokens(org), await rewriteTokens(org), (await logged(org)).length];
    await step();
    const rows = [...new Set((await logged(org)).slice(already))].sort();
    expect(moved(rewrites, await rewriteTokens(org))).toEqual([]);
    const expected = [...new Set([...written, ...rows.flatMap((e) => datasetsOf(e.split(" ")[0]))])].filter((k) => before.has(k)).sort();
    expect(moved(before, await tokens(org))).toEqual(expected);
    return rows;
  };

  beforeAll(async () => {
    harness = await startCatalogHarness();
  });
  afterAll(async () => {
    await harness.stop();
    await pool.end();
  });

  it("a supplier's or customer's links to products rewrite the linked products only, and move the listing's ETag", async () => {
    const org = await createTestOrganization(pool);
    const [supplier, customer, product] = [randomUUID(), randomUUID(), randomUUID()];
    await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]);
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [org, supplier]);
    await pool.query("INSERT INTO customers (organization_id, id, name) VALUES ($1, $2, 'Bakery')", [org, customer]);
    const etag = (await collectListing(harness.client, { organizationId: org })).etag;
    const products = [`product_links ${product}`];

    expect(await rewrittenBy(org, () => pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]))).toEqual(products);
    const cheap = await collectListing(harness.client, { organizationId: org, ifNoneMatch: etag });
    expect(cheap.notModified).toBe(false);
    expect(cheap.etag).not.toBe(etag);

    expect(await rewrittenBy(org, () => pool.query("INSERT INTO customer_products (organization_id, customer_id, product_id) VALUES ($1, $2, $3)", [org, customer, product]))).toEqual(products);
    expect(await rewrittenBy(org, () => pool.query("DELETE FROM supplier_products WHERE organization_id = $1", [org]))).toEqual(products);
    // A statement that changes no link (nothing to delete) rewrites nothing.
    expect(await rewrittenBy(org, () => pool.query("DELETE FROM supplier_products WHERE organization_id = $1", [org]))).toEqual([]);
    // Renamed, the supplier's and the customer's products are rewritten; the supplier's own row is an edit.
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    expect(await rewrittenBy(org, () => pool.query("UPDATE suppliers SET name = 'Old mill' WHERE organization_id = $1 AND id = $2", [org, supplier]), ["resources_suppliers"])).toEqual([`suppliers ${supplier}`]);
    // Renamed, a product is one entry whatever lists it (the suppliers and customers feeds expand it).
    expect(await rewrittenBy(org, () => pool.query("UPDATE products SET name = 'Rye' WHERE organization_id = $1 AND id = $2", [org, product]), ["resources_products"])).toEqual([`products ${product}`]);
  });

  it("a submission, step or form change rewrites the deviations that show it; one no deviation shows rewrites none", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const [own, linked, unrelated, future] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const [step, otherStep, dev1, dev2] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [org, form]);
    await pool.query(
      "INSERT INTO submissions (organization_id, id, form_id, record_id) SELECT $1, s.id, $2, 'AU-' || s.n FROM unnest($3::uuid[]) WITH ORDINALITY AS s(id, n)",
      [org, form, [own, linked, unrelated]],
    );
    await pool.query("INSERT INTO submission_steps (organization_id, id, submission_id, name) VALUES ($1, $2, $3, 'Record'), ($1, $4, $3, 'Verify')", [org, step, own, otherStep]);
    await pool.query(
      "INSERT INTO deviations (organization_id, id, code, submission_id, step_id, severity, linked_record_id) VALUES ($1, $6, 'DEV-1', $2, $3, 'Low', $4), ($1, $7, 'DEV-2', $2, NULL, 'Low', $5)",
      [org, own, step, linked, future, dev1, dev2],
    );
    const update = (sql: string, ...params: unknown[]) => () => pool.query(sql, [org, ...params]);
    const rewritten = (step: () => Promise<unknown>) => rewrittenBy(org, step);
    const submission = (id: string) => [`submissions ${id}`];
    const first = [`deviation_notes ${dev1}`];

    // Not shown by any deviation: another submission's status, the own submission's values, another step.
    expect(await rewritten(update("UPDATE submissions SET status = 'Completed' WHERE organization_id = $1 AND id = $2", unrelated))).toEqual([]);
    expect(await rewritten(update(`UPDATE submissions SET "values" = '{"a": 1}' WHERE organization_id = $1 AND id = $2`, own))).toEqual([]);
    expect(await rewritten(update("UPDATE submission_steps SET status = 'Completed' WHERE organization_id = $1 AND id = $2", otherStep))).toEqual([]);

    // Shown: the own submission's archive flag and status, the linked record's code, the step's status, the form's name.
    expect(await rewritten(update("UPDATE submissions SET is_archived = true WHERE organization_id = $1 AND id = $2", own))).toEqual(submission(own));
    expect(await rewritten(update("UPDATE submissions SET status = 'Cancelled' WHERE organization_id = $1 AND id = $2", own))).toEqual(submission(own));
    expect(await rewritten(update("UPDATE submissions SET record_id = 'AU-99' WHERE organization_id = $1 AND id = $2", linked))).toEqual(submission(linked));
    expect(await rewritten(update("UPDATE submission_steps SET status = 'Completed' WHERE organization_id = $1 AND id = $2", step))).toEqual([`submission_steps ${step}`]);
    expect(await rewritten(update("UPDATE forms SET name = 'Hygiene audit' WHERE organization_id = $1 AND id = $2", form))).toEqual([`forms ${form}`]);

    // The deviation's standalone comment, written without moving its last_modified (111); with a move, incremental syncs see it.
    expect(await rewritten(update("UPDATE deviations SET comment = 'a note' WHERE organization_id = $1 AND code = 'DEV-1'"))).toEqual(first);
    expect(await rewritten(update("UPDATE deviations SET comment = NULL WHERE organization_id = $1 AND code = 'DEV-1'"))).toEqual(first);
    expect(await logged(org).then(async (n) => { await update("UPDATE deviations SET comment = 'later', last_modified = clock_timestamp() WHERE organization_id = $1 AND code = 'DEV-1'")(); return (await logged(org)).length - n.length; })).toBe(0);

    // The linked record deleted (its code shows empty from now on), then a record created with the id a deviation links to.
    expect(await rewritten(update("DELETE FROM submissions WHERE organization_id = $1 AND id = $2", linked))).toEqual(submission(linked));
    expect(await rewritten(update("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, $2, $3, 'AU-7')", future, form))).toEqual(submission(future));
    expect(await rewritten(update("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, gen_random_uuid(), $2, 'AU-8')", form))).toEqual([]);
  });

  it("a named record renamed, deleted, or inserted while rows already name its id rewrites those rows only (046, 110)", async () => {
    const org = await createTestOrganization(pool);
    const other = await createTestOrganization(pool);
    const [product, unnamed, lot, site, form, submission] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const otherBefore = await tokens(other);
    const products = ["resources_products"];
    const insertProduct = (id: string, upsert = false) => () =>
      pool.query(`INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')${upsert ? " ON CONFLICT (organization_id, id) DO UPDATE SET name = excluded.name" : ""}`, [org, id]);

    // A lot loaded before its product: its product_name was empty and is filled in.
    await pool.query("INSERT INTO lots (organization_id, id, code, product_id) VALUES ($1, $2, 'L-1', $3)", [org, lot, product]);
    const entry = [`products ${product}`];
    expect(await rewrittenBy(org, insertProduct(product), products)).toEqual(entry);
    // A product nothing names logs nothing.
    expect(await rewrittenBy(org, insertProduct(unnamed), products)).toEqual([]);
    // Renamed, deleted, restored under its id while the lot still names it; an upsert that changes no name logs nothing.
    expect(await rewrittenBy(org, () => pool.query("UPDATE products SET name = 'Rye' WHERE organization_id = $1 AND id = $2", [org, product]), products)).toEqual(entry);
    expect(await rewrittenBy(org, () => pool.query("DELETE FROM products WHERE organization_id = $1 AND id = $2", [org, product]), products)).toEqual(entry);
    expect(await rewrittenBy(org, insertProduct(product, true), products)).toEqual(entry);
    expect(await rewrittenBy(org, insertProduct(product, true), products)).toEqual([]);

    // A site first named by a submission (a form dataset's live site_name): one entry; every feed showing sites moves.
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [org, form]);
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, site_id) VALUES ($1, $2, $3, 'AU-1', $4)", [org, submission, form, site]);
    expect(await rewrittenBy(org, () => pool.query("INSERT INTO sites (organization_id, id, name, path, time_zone) VALUES ($1, $2, 'Plant', 'Plant', 'UTC')", [org, site]))).toEqual([`sites ${site}`]);
    expect(await rewrittenBy(org, () => pool.query("UPDATE sites SET time_zone = 'Europe/Oslo' WHERE organization_id = $1 AND id = $2", [org, site]))).toEqual([`sites ${site}`]);
    expect(moved(otherBefore, await tokens(other))).toEqual([]);
  });

  it("the references the feeds expand entries by are exactly those the export looks names up by; the triggers move the same feeds", async () => {
    // Named records and the records deviations borrow columns from; not a row's own id (its note, its links, a document's own name).
    const shown = new Set(["sites", "teams", "employees", "suppliers", "customers", "products", "product_categories", "areas", "submissions", "submission_steps", "forms"]);
    const followed = Object.entries(REWRITE_REFERENCES).flatMap(([feed, refs]) =>
      refs.filter((r) => r.column !== "id").map((r) => `${r.kind} <- ${r.table ?? (feed === "form" ? "submissions" : feed)}.${r.column} => ${feed}`),
    );
    expect(new Set(followed.map((ref) => ref.split(" <- ")[0]))).toEqual(shown);
    expect(sorted([...new Set(followed)])).toEqual(sorted(exportedNameReferences()));
    // Migration 120's rewrite_kind_feeds() (the changeTokens a kind moves) is the same map.
    const kinds = [...new Set(Object.values(REWRITE_REFERENCES).flatMap((refs) => refs.map((r) => r.kind)))];
    for (const kind of kinds) {
      const { rows } = await pool.query<{ feeds: string[] }>("SELECT rewrite_kind_feeds($1) AS feeds", [kind]);
      expect([kind, sorted(rows[0].feeds)]).toEqual([kind, sorted(feedsOf(kind).filter((f) => f !== "grid"))]);
    }
  });

  it("logs and moves only its own organization's rows and tokens", async () => {
    const [org, other] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const [supplier, product] = [randomUUID(), randomUUID()];
    for (const o of [org, other]) await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [o, product]);
    const before = await tokens(other);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    expect(moved(before, await tokens(other))).toEqual([]);
    expect(await logged(other)).toEqual([]);
    expect(await logged(org)).toEqual([`product_links ${product}`]);
  });
});

const sorted = (xs: string[]) => [...xs].sort();

/**
 * "<named table> <- <table>.<column>" for every look-up of a name by id in the export's SQL: the
 * resource datasets' single look-ups (`x.id = r.<column>`) and lists through link tables
 * (`x.id = j.<column>`), the deviations' joins (`r.` is the deviation, `sub.` its submission), and
 * a form dataset's site (render-sql.ts joins sites on the submission's site_id), each with the feed
 * of the rows that show it.
 */
function exportedNameReferences(): string[] {
  const refs = new Set<string>(["sites <- submissions.site_id => form"]);
  for (const kind of Object.keys(RESOURCE_CORE_EXPRESSIONS) as ResourceKind[]) {
    for (const sql of Object.values(RESOURCE_CORE_EXPRESSIONS[kind])) {
      for (const m of sql.matchAll(/FROM (\w+) x WHERE x\.organization_id = r\.organization_id AND x\.id = r\.(\w+)/g)) refs.add(`${m[1]} <- ${RESOURCE_TABLES[kind]}.${m[2]} => ${RESOURCE_TABLES[kind]}`);
      for (const m of sql.matchAll(/FROM (\w+) j JOIN (\w+) x ON x\.organization_id = j\.organization_id AND x\.id = j\.(\w+)/g)) refs.add(`${m[2]} <- ${m[1]}.${m[3]} => ${RESOURCE_TABLES[kind]}`);
    }
  }
  const rowTables: Record<string, string> = { r: "deviations", sub: "submissions", linked: "submissions" };
  for (const m of DEVIATION_JOINS.matchAll(/FROM (\w+) x WHERE x\.organization_id = r\.organization_id AND x\.id = (\w+)\.(\w+)/g)) {
    refs.add(`${m[1]} <- ${rowTables[m[2]] ?? m[2]}.${m[3]} => deviations`);
  }
  return [...refs];
}
