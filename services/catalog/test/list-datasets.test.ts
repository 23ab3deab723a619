import { randomUUID } from "node:crypto";
import { FIXED_DATASETS } from "@exportsvc/datasets";
import { Client } from "pg";
import { CatalogService } from "@exportsvc/proto";
import { createClient } from "@exportsvc/rpc";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { collectListing, insertFormDataset, startCatalogHarness, type ApiListingEntry, type CatalogHarness } from "./support";

describe("ListDatasets", () => {
  const pool = testPool();
  let harness: CatalogHarness;
  const list = (org: string) => collectListing(harness.client, { organizationId: org });
  const tokens = async (org: string) => new Map((await list(org)).datasets.map((d) => [d.key, d.changeToken]));
  const byKey = (datasets: ApiListingEntry[], key: string) => datasets.find((d) => d.key === key)!;

  beforeAll(async () => {
    harness = await startCatalogHarness();
  });
  afterAll(async () => {
    await harness.stop();
    await pool.end();
  });

  it("lists the fixed datasets in order with display names only where the contract has them (docs/contract.md §3)", async () => {
    const org = await createTestOrganization(pool);
    const { datasets } = await list(org);
    expect(datasets.map((d) => d.key)).toEqual(FIXED_DATASETS.map((d) => d.key));
    for (const d of datasets.filter((x) => x.key.startsWith("resources_"))) {
      expect(d.displayName).toBeUndefined();
      expect(d.parentDataset).toBeUndefined();
      expect(d.childDatasets).toEqual([]);
    }
    expect(byKey(datasets, "deviations").displayName).toBe("Deviations");
  });

  it("appends _cursor (text) last and links each dataset's CSV path", async () => {
    const org = await createTestOrganization(pool);
    await pool.query(
      "INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, $2, 'suppliers', 'Rating', 'Supplier rating', 'Number')",
      [org, randomUUID()],
    );
    const { datasets } = await list(org);
    for (const d of datasets) {
      expect(d.columns.at(-1)).toEqual(expect.objectContaining({ key: "_cursor", dataType: "text" }));
      expect(d.columns.filter((c) => c.key === "_cursor")).toHaveLength(1);
      expect(d.links.csv).toBe(`/v1/datasets/${d.key}/csv`);
      expect(d.links.deletions).toBe(`/v1/datasets/${d.key}/deletions`);
    }
    const suppliers = byKey(datasets, "resources_suppliers");
    // Read-your-writes: the attribute added just before the listing is there.
    expect(suppliers.columns.at(-2)).toEqual(expect.objectContaining({ key: "rating", dataType: "number", label: "Supplier rating" }));
    expect(suppliers.columns[0]).toEqual(expect.objectContaining({ key: "id", dataType: "uuid" }));
    expect(byKey(datasets, "resources_products").columns.map((c) => c.key)).not.toContain("rating");
  });

  it("moves a dataset's changeToken on insert, update and delete of its own rows, and for rewrites of rows it can show (the rewrite feed)", async () => {
    const org = await createTestOrganization(pool);
    const supplier = randomUUID();
    const product = randomUUID();
    await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]);
    const t0 = await tokens(org);
    const movedBetween = (a: Map<string, string>, b: Map<string, string>) => [...a.keys()].filter((k) => a.get(k) !== b.get(k)).sort();

    // The supplier's own row; its link rewrites the product's `suppliers` column (migration 120: the products feed).
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [org, supplier]);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    const t1 = await tokens(org);
    expect(movedBetween(t0, t1)).toEqual(["resources_products", "resources_suppliers"]);

    // Renaming the product: its own row, and the datasets whose rows can show a product's name (suppliers, customers, lots, recipes).
    await pool.query("UPDATE products SET name = 'Rye flour' WHERE organization_id = $1 AND id = $2", [org, product]);
    const t2 = await tokens(org);
    expect(movedBetween(t1, t2)).toEqual(["resources_customers", "resources_lots", "resources_products", "resources_recipes", "resources_suppliers"]);

    // An edit of a column no other row shows: the supplier's own dataset only.
    await pool.query("UPDATE suppliers SET city = 'Ghent' WHERE organization_id = $1 AND id = $2", [org, supplier]);
    const t3 = await tokens(org);
    expect(movedBetween(t2, t3)).toEqual(["resources_suppliers"]);

    // A deleted supplier: its own dataset (tombstone) and the rows that can show a supplier's name.
    await pool.query("DELETE FROM suppliers WHERE organization_id = $1 AND id = $2", [org, supplier]);
    const t4 = await tokens(org);
    expect(movedBetween(t3, t4)).toEqual(["deviations", "resources_products", "resources_suppliers"].filter((k) => t3.has(k)));
  });

  it("moves the token again when counted rows held back by the visibility horizon become servable", async () => {
    const org = await createTestOrganization(pool);
    await pool.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Bleach')", [org]);
    const settled = await tokens(org);
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "source-system" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_current_xact_id()"); // an open writer: holds every organization's horizon
      await pool.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Lye')", [org]);
      const held = await tokens(org);
      expect(held.get("resources_chemicals")).not.toBe(settled.get("resources_chemicals"));
      expect((await tokens(org)).get("resources_chemicals")).toBe(held.get("resources_chemicals")); // stable while held
      expect(held.get("resources_suppliers")).toBe(settled.get("resources_suppliers")); // nothing counted there is held
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    const released = await tokens(org);
    expect(released.get("resources_chemicals")).not.toBe(settled.get("resources_chemicals"));
    expect(new Set([settled, released].map((t) => t.get("resources_chemicals"))).size).toBe(2);
  });

  it("keeps a row stamped in the future held (token included) until its time has come", async () => {
    // The row is due a moment after it is written; a first listing taken before then must not count
    // it. A machine too loaded to list within that moment gets a longer one (and a new organization).
    const heldRow = async (seconds: number) => {
      const org = await createTestOrganization(pool);
      const { rows } = await pool.query<{ due: Date }>(
        "INSERT INTO lots (organization_id, id, code, last_modified) VALUES ($1, gen_random_uuid(), 'L-1', clock_timestamp() + make_interval(secs => $2)) RETURNING last_modified AS due",
        [org, seconds],
      );
      const early = await tokens(org);
      const inTime = (await pool.query<{ early: boolean }>("SELECT clock_timestamp() < $1 AS early", [rows[0].due])).rows[0].early;
      return inTime ? { org, due: rows[0].due, early } : undefined;
    };
    const held = (await heldRow(1.5)) ?? (await heldRow(6)) ?? (await heldRow(20));
    if (!held) throw new Error("no listing finished within 20 s of a write");
    const { org, due: dueAt, early } = held;
    // While the row is held the token follows the horizon; once the row's time has come it settles:
    // two listings in a row agree. Wait for that, not for a fixed time.
    let due = await tokens(org);
    for (let i = 0; i < 400; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const next = await tokens(org);
      if (next.get("resources_lots") === due.get("resources_lots")) break;
      due = next;
    }
    expect((await pool.query<{ past: boolean }>("SELECT clock_timestamp() >= $1 AS past", [dueAt])).rows[0].past).toBe(true);
    expect(due.get("resources_lots")).not.toBe(early.get("resources_lots"));
    expect((await tokens(org)).get("resources_lots")).toBe(due.get("resources_lots")); // settled now: stable
  });

  it("moves the token when the dataset is reshaped, not when a column is only relabelled", async () => {
    const org = await createTestOrganization(pool);
    const before = await list(org);
    const attribute = randomUUID();
    await pool.query(
      "INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, $2, 'lots', 'batch', 'Batch', 'Text')",
      [org, attribute],
    );
    const reshaped = await list(org);
    expect(byKey(reshaped.datasets, "resources_lots").changeToken).not.toBe(byKey(before.datasets, "resources_lots").changeToken);
    expect(reshaped.etag).not.toBe(before.etag);

    await pool.query("UPDATE custom_attribute_definitions SET name = 'Batch no.' WHERE organization_id = $1 AND id = $2", [org, attribute]);
    const relabelled = await list(org);
    expect(byKey(relabelled.datasets, "resources_lots").changeToken).toBe(byKey(reshaped.datasets, "resources_lots").changeToken);
    expect(byKey(relabelled.datasets, "resources_lots").columns.at(-2)!.label).toBe("Batch no.");
    expect(relabelled.etag).not.toBe(reshaped.etag);
  });

  it("keeps the ETag while nothing changes and moves it when anything listed moves", async () => {
    const org = await createTestOrganization(pool);
    const first = await list(org);
    expect(first.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const second = await list(org);
    expect(second.etag).toBe(first.etag);
    expect(second.datasets).toEqual(first.datasets);

    await pool.query("INSERT INTO deviations (organization_id, id, code, submission_id, severity) SELECT $1, gen_random_uuid(), 'DEV-1', s.id, 'Low' FROM (SELECT $2::uuid AS id) s WHERE false", [org, randomUUID()]);
    // A statement touching no rows changes nothing.
    expect((await list(org)).etag).toBe(first.etag);

    await pool.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Bleach')", [org]);
    expect((await list(org)).etag).not.toBe(first.etag);
  });

  it("answers notModified from the stored listing version, and only while nothing listed moved", async () => {
    const org = await createTestOrganization(pool);
    const cheap = (etag: string) => collectListing(harness.client, { organizationId: org, ifNoneMatch: etag });
    const first = await list(org);
    const hit = await cheap(first.etag);
    expect(hit).toEqual(expect.objectContaining({ notModified: true, etag: first.etag, datasets: [] }));
    expect((await cheap(`W/${first.etag}, "other"`)).notModified).toBe(true);
    const miss = await cheap('"not-the-etag"');
    expect(miss.notModified).toBe(false);
    expect(miss.datasets).toEqual(first.datasets);
    expect(miss.etag).toBe(first.etag);

    // Each thing the listing shows moves the ETag, and the old ETag no longer answers notModified:
    // a relabelled column (registry row), a counted change (dataset_changes), a rename (rewrite counter).
    const attribute = randomUUID();
    await pool.query(
      "INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, $2, 'lots', 'batch', 'Batch', 'Text')",
      [org, attribute],
    );
    let previous = (await list(org)).etag;
    expect(previous).not.toBe(first.etag);
    const steps = [
      () => pool.query("UPDATE custom_attribute_definitions SET name = 'Batch no.' WHERE organization_id = $1 AND id = $2", [org, attribute]),
      () => pool.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Bleach')", [org]),
      () =>
        pool.query(
          "INSERT INTO dataset_rewrites (organization_id, version) VALUES ($1, 1) ON CONFLICT (organization_id) DO UPDATE SET version = dataset_rewrites.version + 1",
          [org],
        ),
    ];
    for (const step of steps) {
      await step();
      const answer = await cheap(previous);
      expect(answer.notModified).toBe(false);
      expect(answer.etag).not.toBe(previous);
      expect(answer.datasets.length).toBeGreaterThan(0);
      expect((await cheap(answer.etag)).notModified).toBe(true);
      previous = answer.etag;
    }
  });

  it("never answers notModified while a counted change is held back by the horizon, and moves the ETag when it settles", async () => {
    const org = await createTestOrganization(pool);
    const cheap = (etag: string) => collectListing(harness.client, { organizationId: org, ifNoneMatch: etag });
    const settled = await list(org);
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "source-system" });
    await writer.connect();
    let held: string;
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_current_xact_id()"); // an open writer: holds every organization's horizon
      await pool.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Lye')", [org]);
      const whileHeld = await cheap(settled.etag);
      expect(whileHeld.notModified).toBe(false);
      held = whileHeld.etag;
      expect(held).not.toBe(settled.etag);
      // Held: the ETag depends on the horizon, so it is decided from the built listing (still a 304 at the gateway).
      const again = await cheap(held);
      expect(again.datasets.length).toBeGreaterThan(0);
      expect(again.etag).toBe(held);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    const released = await cheap(held);
    expect(released.notModified).toBe(false);
    expect(new Set([settled.etag, held, released.etag]).size).toBe(3);
    expect((await cheap(released.etag)).notModified).toBe(true);
  });

  it("decides no cheap 304 while a form change of the organization is pending", async () => {
    const org = await createTestOrganization(pool);
    await insertFormDataset(pool, org, { key: "haccp", kind: "submission", displayName: "HACCP" });
    const first = await list(org);
    expect((await collectListing(harness.client, { organizationId: org, ifNoneMatch: first.etag })).notModified).toBe(true);
    const form = (await pool.query<{ source_ref: string }>("SELECT source_ref FROM dataset_registry WHERE organization_id = $1 AND key = 'haccp'", [org])).rows[0].source_ref;
    await pool.query(
      `INSERT INTO form_dataset_changes (organization_id, form_id, kind, source_last_modified)
       VALUES ($1, $2, 'submission', clock_timestamp() - interval '1 hour')`,
      [org, form],
    );
    const answer = await collectListing(harness.client, { organizationId: org, ifNoneMatch: first.etag });
    expect(answer.notModified).toBe(false);
    expect(answer.datasets.length).toBeGreaterThan(0);
  });

  it("lists form datasets after the fixed ones with parents, children and display names", async () => {
    const org = await createTestOrganization(pool);
    await list(org);
    await insertFormDataset(pool, org, { key: "audit", kind: "submission", displayName: "Audit" });
    await insertFormDataset(pool, org, { key: "audit__checks", kind: "grid", displayName: "Audit - Checks", parentKey: "audit" });
    await insertFormDataset(pool, org, { key: "audit__checks__items", kind: "grid", displayName: "Audit - Checks - Items", parentKey: "audit__checks" });
    await insertFormDataset(pool, org, { key: "batch_log", kind: "submission", displayName: "batch log" });
    await insertFormDataset(pool, org, { key: "old_form", kind: "submission", displayName: "Old form", state: "retired" });
    await insertFormDataset(pool, org, { key: "old_form__rows", kind: "grid", displayName: "Old form - Rows", parentKey: "old_form" });
    const { datasets } = await list(org);
    expect(datasets.map((d) => d.key)).toEqual([
      ...FIXED_DATASETS.map((d) => d.key),
      "audit",
      "audit__checks",
      "audit__checks__items",
      "batch_log",
      "old_form__rows",
    ]);
    const audit = byKey(datasets, "audit");
    expect(audit.displayName).toBe("Audit");
    expect(audit.parentDataset).toBeUndefined();
    expect(audit.childDatasets).toEqual(["audit__checks"]);
    const checks = byKey(datasets, "audit__checks");
    expect(checks.parentDataset).toBe("audit");
    expect(checks.childDatasets).toEqual(["audit__checks__items"]);
    expect(checks.displayName).toBe("Audit - Checks");
    expect(byKey(datasets, "audit__checks__items").parentDataset).toBe("audit__checks");
    // The parent's key was retired (form renamed): the grid stays, without parentDataset.
    expect(byKey(datasets, "old_form__rows").parentDataset).toBeUndefined();
    expect(audit.columns.map((c) => c.key)).toEqual(["id", "temperature", "last_modified", "_cursor"]);
  });

  it("moves a form dataset's token with its own counter in dataset_changes and on rebuild", async () => {
    const org = await createTestOrganization(pool);
    await insertFormDataset(pool, org, { key: "haccp", kind: "submission", displayName: "HACCP" });
    const t0 = await tokens(org);
    await pool.query("INSERT INTO dataset_changes (organization_id, dataset, version) VALUES ($1, 'haccp', 1)", [org]);
    const t1 = await tokens(org);
    expect(t1.get("haccp")).not.toBe(t0.get("haccp"));
    expect(t1.get("deviations")).toBe(t0.get("deviations"));
    await pool.query("UPDATE dataset_registry SET generation = generation + 1 WHERE organization_id = $1 AND key = 'haccp'", [org]);
    const t2 = await tokens(org);
    expect(t2.get("haccp")).not.toBe(t1.get("haccp"));
  });

  it("keeps organizations apart", async () => {
    const a = await createTestOrganization(pool);
    const b = await createTestOrganization(pool);
    await insertFormDataset(pool, a, { key: "secret_form", kind: "submission", displayName: "Secret" });
    expect((await list(b)).datasets.map((d) => d.key)).not.toContain("secret_form");
  });

  it("answers 400 for an organization id that is not a uuid", async () => {
    await expect(list("not-a-uuid")).rejects.toMatchObject({ status: 400 });
  });

  it("streams a listing larger than a message may be: 12 000 datasets to a client that accepts 128 KiB messages", async () => {
    const org = await createTestOrganization(pool);
    await list(org);
    const columns = [
      { key: "id", dataType: "uuid", label: "ID", source: { kind: "table", column: "id" } },
      { key: "last_modified", dataType: "dateTime", label: "Last Modified", source: { kind: "table", column: "last_modified" } },
    ];
    await pool.query(
      `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, columns, shape_fingerprint, state, table_name)
       SELECT $1, 'form_' || g, 'submission', gen_random_uuid()::text, 'Form ' || g, $2::jsonb, 'fp', 'ready', 'form_ds.t_stream_' || g
         FROM generate_series(1, 12000) g`,
      [org, JSON.stringify(columns)],
    );
    const small = createClient(CatalogService, harness.address, { "grpc.max_receive_message_length": 128 * 1024 });
    try {
      const listing = await collectListing(small, { organizationId: org });
      expect(listing.datasets).toHaveLength(12_000 + FIXED_DATASETS.length);
      expect(listing.pieces).toBeGreaterThan(20);
      expect(listing.datasets.at(-1)).toMatchObject({ key: "form_9999", displayName: "Form 9999" });
      expect(new Set(listing.datasets.map((d) => d.key)).size).toBe(listing.datasets.length);
      // The same listing over the default client is byte for byte the same.
      expect((await list(org)).datasets).toEqual(listing.datasets);
    } finally {
      small.close();
    }
  }, 120_000);
});
