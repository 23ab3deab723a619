/**
 * Per-dataset rewrite counters (migration 105): a dataset's rewriteToken moves when a relation or a
 * borrowed column its rows show changes in another record, and only that dataset's token moves.
 * Named records (migration 110): a record inserted while rows already name its id (loaded out of
 * order, restored after a delete) moves the organization's tokens, as its deletion did. A deviation's standalone comment written without a
 * last_modified move (migration 111) moves the deviations token.
 */
import { randomUUID } from "node:crypto";
import { RESOURCE_CORE_EXPRESSIONS, RESOURCE_TABLES, type ResourceKind } from "@exportsvc/datasets";
import { DEVIATION_JOINS } from "../../../packages/datasets/src/sql/deviations";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { collectListing, startCatalogHarness, type CatalogHarness } from "./support";

describe("rewriteToken: relations and borrowed columns (migration 105)", () => {
  const pool = testPool();
  let harness: CatalogHarness;
  const rewriteTokens = async (org: string) =>
    new Map((await collectListing(harness.client, { organizationId: org })).datasets.map((d) => [d.key, d.rewriteToken]));
  /** The keys whose rewriteToken differs between two listings. */
  const moved = (before: Map<string, string | undefined>, after: Map<string, string | undefined>) => [...after.keys()].filter((k) => after.get(k) !== before.get(k)).sort();
  /** Runs the step and answers which rewriteTokens it moved. */
  const movedBy = async (org: string, step: () => Promise<unknown>) => {
    const before = await rewriteTokens(org);
    await step();
    return moved(before, await rewriteTokens(org));
  };

  beforeAll(async () => {
    harness = await startCatalogHarness();
  });
  afterAll(async () => {
    await harness.stop();
    await pool.end();
  });

  it("a supplier's or customer's links to products move the products token only, and the listing's ETag", async () => {
    const org = await createTestOrganization(pool);
    const [supplier, customer, product] = [randomUUID(), randomUUID(), randomUUID()];
    await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]);
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [org, supplier]);
    await pool.query("INSERT INTO customers (organization_id, id, name) VALUES ($1, $2, 'Bakery')", [org, customer]);
    const etag = (await collectListing(harness.client, { organizationId: org })).etag;

    expect(await movedBy(org, () => pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]))).toEqual([
      "resources_products",
    ]);
    const cheap = await collectListing(harness.client, { organizationId: org, ifNoneMatch: etag });
    expect(cheap.notModified).toBe(false);
    expect(cheap.etag).not.toBe(etag);

    expect(await movedBy(org, () => pool.query("INSERT INTO customer_products (organization_id, customer_id, product_id) VALUES ($1, $2, $3)", [org, customer, product]))).toEqual([
      "resources_products",
    ]);
    expect(await movedBy(org, () => pool.query("DELETE FROM supplier_products WHERE organization_id = $1", [org]))).toEqual(["resources_products"]);
    // A statement that changes no link (nothing to delete) moves nothing.
    expect(await movedBy(org, () => pool.query("DELETE FROM supplier_products WHERE organization_id = $1", [org]))).toEqual([]);
  });

  it("a submission, step or form change a deviation shows moves the deviations token; one no deviation shows moves none", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const [own, linked, unrelated, future] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const [step, otherStep] = [randomUUID(), randomUUID()];
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [org, form]);
    await pool.query(
      "INSERT INTO submissions (organization_id, id, form_id, record_id) SELECT $1, s.id, $2, 'AU-' || s.n FROM unnest($3::uuid[]) WITH ORDINALITY AS s(id, n)",
      [org, form, [own, linked, unrelated]],
    );
    await pool.query("INSERT INTO submission_steps (organization_id, id, submission_id, name) VALUES ($1, $2, $3, 'Record'), ($1, $4, $3, 'Verify')", [org, step, own, otherStep]);
    await pool.query(
      "INSERT INTO deviations (organization_id, id, code, submission_id, step_id, severity, linked_record_id) VALUES ($1, gen_random_uuid(), 'DEV-1', $2, $3, 'Low', $4), ($1, gen_random_uuid(), 'DEV-2', $2, NULL, 'Low', $5)",
      [org, own, step, linked, future],
    );
    const update = (sql: string, ...params: unknown[]) => () => pool.query(sql, [org, ...params]);

    // Not shown by any deviation: another submission's status, the own submission's values, another step.
    expect(await movedBy(org, update("UPDATE submissions SET status = 'Completed' WHERE organization_id = $1 AND id = $2", unrelated))).toEqual([]);
    expect(await movedBy(org, update(`UPDATE submissions SET "values" = '{"a": 1}' WHERE organization_id = $1 AND id = $2`, own))).toEqual([]);
    expect(await movedBy(org, update("UPDATE submission_steps SET status = 'Completed' WHERE organization_id = $1 AND id = $2", otherStep))).toEqual([]);

    // Shown: the own submission's archive flag and status, the linked record's code, the step's status, the form's name.
    expect(await movedBy(org, update("UPDATE submissions SET is_archived = true WHERE organization_id = $1 AND id = $2", own))).toEqual(["deviations"]);
    expect(await movedBy(org, update("UPDATE submissions SET status = 'Cancelled' WHERE organization_id = $1 AND id = $2", own))).toEqual(["deviations"]);
    expect(await movedBy(org, update("UPDATE submissions SET record_id = 'AU-99' WHERE organization_id = $1 AND id = $2", linked))).toEqual(["deviations"]);
    expect(await movedBy(org, update("UPDATE submission_steps SET status = 'Completed' WHERE organization_id = $1 AND id = $2", step))).toEqual(["deviations"]);
    const formRename = await movedBy(org, update("UPDATE forms SET name = 'Hygiene audit' WHERE organization_id = $1 AND id = $2", form));
    expect(formRename).toContain("deviations");
    expect(formRename.filter((k) => k.startsWith("resources_"))).toEqual([]);

    // The deviation's standalone comment, written without moving its last_modified (111); with a move, incremental syncs see it.
    expect(await movedBy(org, update("UPDATE deviations SET comment = 'a note' WHERE organization_id = $1 AND code = 'DEV-1'"))).toEqual(["deviations"]);
    expect(await movedBy(org, update("UPDATE deviations SET comment = NULL WHERE organization_id = $1 AND code = 'DEV-1'"))).toEqual(["deviations"]);
    expect(await movedBy(org, update("UPDATE deviations SET comment = 'later', last_modified = clock_timestamp() WHERE organization_id = $1 AND code = 'DEV-1'"))).toEqual([]);
    expect(await movedBy(org, update("UPDATE deviations SET severity = 'High' WHERE organization_id = $1 AND code = 'DEV-2'"))).toEqual([]);

    // The linked record deleted (its code shows empty from now on), then a record created with the id a deviation links to.
    expect(await movedBy(org, update("DELETE FROM submissions WHERE organization_id = $1 AND id = $2", linked))).toEqual(["deviations"]);
    expect(await movedBy(org, update("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, $2, $3, 'AU-7')", future, form))).toEqual(["deviations"]);
    expect(await movedBy(org, update("INSERT INTO submissions (organization_id, id, form_id, record_id) VALUES ($1, gen_random_uuid(), $2, 'AU-8')", form))).toEqual([]);
  });

  it("a named record inserted while rows already name its id moves every token (migration 110); one nothing names moves none", async () => {
    const org = await createTestOrganization(pool);
    const other = await createTestOrganization(pool);
    const [product, unnamed, sameTransaction, site, form] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const all = [...(await rewriteTokens(org)).keys()].sort();
    const otherBefore = await rewriteTokens(other);
    const insertProduct = (id: string, upsert = false) => () =>
      pool.query(`INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')${upsert ? " ON CONFLICT (organization_id, id) DO UPDATE SET name = excluded.name" : ""}`, [org, id]);

    // A lot loaded before its product: its product_name was empty and is filled in.
    await pool.query("INSERT INTO lots (organization_id, id, code, product_id) VALUES ($1, gen_random_uuid(), 'L-1', $2)", [org, product]);
    expect(await movedBy(org, insertProduct(product))).toEqual(all);
    // A product nothing names moves nothing.
    expect(await movedBy(org, insertProduct(unnamed))).toEqual([]);
    // Rows written by the same transaction as the record were never seen without its name.
    expect(
      await movedBy(org, async () => {
        const client = await pool.connect();
        try {
          await client.query("BEGIN");
          await client.query("INSERT INTO recipes (organization_id, id, name, output_product_id) VALUES ($1, gen_random_uuid(), 'Bread', $2)", [org, sameTransaction]);
          await client.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Yeast')", [org, sameTransaction]);
          await client.query("COMMIT");
        } finally {
          client.release();
        }
      }),
    ).toEqual([]);

    // Deleted (046 moves every token: the lot's product name went empty), then restored under its id
    // while the lot still names it, also by the upsert writers use; an upsert that updates moves nothing.
    expect(await movedBy(org, () => pool.query("DELETE FROM products WHERE organization_id = $1 AND id = $2", [org, product]))).toEqual(all);
    expect(await movedBy(org, insertProduct(product, true))).toEqual(all);
    expect(await movedBy(org, insertProduct(product, true))).toEqual([]);

    // A site first named by a submission (a form dataset's site_name).
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Audit', 'AU')", [org, form]);
    await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, site_id) VALUES ($1, gen_random_uuid(), $2, 'AU-1', $3)", [org, form, site]);
    expect(
      await movedBy(org, () => pool.query("INSERT INTO sites (organization_id, id, name, path, time_zone) VALUES ($1, $2, 'Plant', 'Plant', 'UTC')", [org, site])),
    ).toEqual(all);
    expect(moved(otherBefore, await rewriteTokens(other))).toEqual([]);
  });

  it("the references migration 110 probes are exactly those the export looks names up by", async () => {
    // Installed: each trigger's arguments are "<table>.<column>" of the rows naming its table.
    const installed = (
      await pool.query<{ target: string; args: string }>(
        `SELECT c.relname AS target, encode(g.tgargs, 'escape') AS args FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
          WHERE g.tgfoid = 'bump_dataset_rewrites_when_named'::regproc AND NOT g.tgisinternal`,
      )
    ).rows.flatMap((r) => r.args.split("\\000").filter(Boolean).map((ref) => `${r.target} <- ${ref}`));
    // The tables whose renames and deletes 046 counts: the records displayed by name.
    const named = new Set(
      (await pool.query<{ t: string }>("SELECT DISTINCT c.relname AS t FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE g.tgfoid = 'bump_dataset_rewrites'::regproc")).rows.map((r) => r.t),
    );
    expect(sorted(installed)).toEqual(sorted(exportedNameReferences().filter((ref) => named.has(ref.split(" <- ")[0]))));
  });

  it("moves only its own organization's tokens", async () => {
    const [org, other] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const [supplier, product] = [randomUUID(), randomUUID()];
    const before = await rewriteTokens(other);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    expect(moved(before, await rewriteTokens(other))).toEqual([]);
  });
});

const sorted = (xs: string[]) => [...xs].sort();

/**
 * "<named table> <- <table>.<column>" for every look-up of a name by id in the export's SQL: the
 * resource datasets' single look-ups (`x.id = r.<column>`) and lists through link tables
 * (`x.id = j.<column>`), the deviations' joins (`r.` is the deviation, `sub.` its submission), and
 * a form dataset's site (render-sql.ts joins sites on the submission's site_id).
 */
function exportedNameReferences(): string[] {
  const refs = new Set<string>(["sites <- submissions.site_id"]);
  for (const kind of Object.keys(RESOURCE_CORE_EXPRESSIONS) as ResourceKind[]) {
    for (const sql of Object.values(RESOURCE_CORE_EXPRESSIONS[kind])) {
      for (const m of sql.matchAll(/FROM (\w+) x WHERE x\.organization_id = r\.organization_id AND x\.id = r\.(\w+)/g)) refs.add(`${m[1]} <- ${RESOURCE_TABLES[kind]}.${m[2]}`);
      for (const m of sql.matchAll(/FROM (\w+) j JOIN (\w+) x ON x\.organization_id = j\.organization_id AND x\.id = j\.(\w+)/g)) refs.add(`${m[2]} <- ${m[1]}.${m[3]}`);
    }
  }
  const rowTables: Record<string, string> = { r: "deviations", sub: "submissions", linked: "submissions" };
  for (const m of DEVIATION_JOINS.matchAll(/FROM (\w+) x WHERE x\.organization_id = r\.organization_id AND x\.id = (\w+)\.(\w+)/g)) {
    refs.add(`${m[1]} <- ${rowTables[m[2]] ?? m[2]}.${m[3]}`);
  }
  return [...refs];
}
