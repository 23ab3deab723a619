/**
 * Per-dataset rewrite counters (migration 105): a dataset's rewriteToken moves when a relation or a
 * borrowed column its rows show changes in another record, and only that dataset's token moves.
 * Restored records (migration 110): a displayed record written again under a deleted id moves the
 * organization's tokens, as its deletion did. A deviation's standalone comment written without a
 * last_modified move (migration 111) moves the deviations token.
 */
import { randomUUID } from "node:crypto";
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

  it("a displayed record deleted and written again under its id moves every token again (migration 110); a new record moves none", async () => {
    const org = await createTestOrganization(pool);
    const other = await createTestOrganization(pool);
    const [product, supplier, lot] = [randomUUID(), randomUUID(), randomUUID()];
    const all = [...(await rewriteTokens(org)).keys()].sort();
    const otherBefore = await rewriteTokens(other);
    const remembered = async () => (await pool.query("SELECT record_table, id::text FROM displayed_record_deletions WHERE organization_id = $1", [org])).rows;

    // First-time inserts (a lot naming its product, then the product) move nothing: the case 110 leaves to the full re-read.
    expect(await movedBy(org, () => pool.query("INSERT INTO lots (organization_id, id, code, product_id) VALUES ($1, $2, 'L-1', $3)", [org, lot, product]))).toEqual([]);
    expect(await movedBy(org, () => pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]))).toEqual([]);

    // Deleted (046 moves every token: the lot's product name went empty), remembered, then restored (110 moves them again).
    expect(await movedBy(org, () => pool.query("DELETE FROM products WHERE organization_id = $1 AND id = $2", [org, product]))).toEqual(all);
    expect(await remembered()).toEqual([{ record_table: "products", id: product }]);
    expect(await movedBy(org, () => pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]))).toEqual(all);
    expect(await remembered()).toEqual([]);
    // A second insert statement of a record not deleted since moves nothing.
    expect(await movedBy(org, () => pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [org, supplier]))).toEqual([]);

    // The upsert writers use (INSERT … ON CONFLICT) restores the same way; an update of a live record is 046's alone.
    await pool.query("DELETE FROM suppliers WHERE organization_id = $1 AND id = $2", [org, supplier]);
    const upsert = () =>
      pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill') ON CONFLICT (organization_id, id) DO UPDATE SET name = excluded.name", [org, supplier]);
    expect(await movedBy(org, upsert)).toEqual(all);
    expect(await movedBy(org, upsert)).toEqual([]);
    expect(moved(otherBefore, await rewriteTokens(other))).toEqual([]);

    // The records an organization's deletion cascades to are not remembered (its earlier deletions
    // are swept with its other tables by exportctl org delete).
    await pool.query("DELETE FROM products WHERE organization_id = $1", [org]);
    expect(await remembered()).toEqual([{ record_table: "products", id: product }]);
    await pool.query("DELETE FROM organizations WHERE id = $1", [org]);
    expect((await pool.query("SELECT 1 FROM suppliers WHERE organization_id = $1", [org])).rowCount).toBe(0);
    expect(await remembered()).toEqual([{ record_table: "products", id: product }]);
    await pool.query("DELETE FROM displayed_record_deletions WHERE organization_id = $1", [org]);
  });

  it("moves only its own organization's tokens", async () => {
    const [org, other] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    const [supplier, product] = [randomUUID(), randomUUID()];
    const before = await rewriteTokens(other);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    expect(moved(before, await rewriteTokens(other))).toEqual([]);
  });
});
