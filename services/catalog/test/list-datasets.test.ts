import { randomUUID } from "node:crypto";
import { FIXED_DATASETS } from "@exportsvc/datasets";
import type { DatasetEntry } from "@exportsvc/proto";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { insertFormDataset, startCatalogHarness, type CatalogHarness } from "./support";

describe("ListDatasets", () => {
  const pool = testPool();
  let harness: CatalogHarness;
  const list = (org: string) => harness.client.listDatasets({ organizationId: org });
  const tokens = async (org: string) => new Map((await list(org)).datasets.map((d) => [d.key, d.changeToken]));
  const byKey = (datasets: DatasetEntry[], key: string) => datasets.find((d) => d.key === key)!;

  beforeAll(async () => {
    harness = await startCatalogHarness();
  });
  afterAll(async () => {
    await harness.stop();
    await pool.end();
  });

  it("lists the fixed datasets in order with display names only where the spec has them", async () => {
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
      expect(d.csvPath).toBe(`/v1/datasets/${d.key}/csv`);
    }
    const suppliers = byKey(datasets, "resources_suppliers");
    // Read-your-writes: the attribute added just before the listing is there.
    expect(suppliers.columns.at(-2)).toEqual(expect.objectContaining({ key: "rating", dataType: "number", label: "Supplier rating" }));
    expect(suppliers.columns[0]).toEqual(expect.objectContaining({ key: "id", dataType: "uuid" }));
    expect(byKey(datasets, "resources_products").columns.map((c) => c.key)).not.toContain("rating");
  });

  it("moves a dataset's changeToken on insert, update and delete of its own rows only", async () => {
    const org = await createTestOrganization(pool);
    const supplier = randomUUID();
    const product = randomUUID();
    await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Flour')", [org, product]);
    const t0 = await tokens(org);

    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'Mill')", [org, supplier]);
    await pool.query("INSERT INTO supplier_products (organization_id, supplier_id, product_id) VALUES ($1, $2, $3)", [org, supplier, product]);
    const t1 = await tokens(org);
    expect(t1.get("resources_suppliers")).not.toBe(t0.get("resources_suppliers"));
    for (const key of t0.keys()) if (key !== "resources_suppliers") expect(t1.get(key)).toBe(t0.get(key));

    // Renaming the product moves the products token, not the suppliers token (whose `products` column shows the name).
    await pool.query("UPDATE products SET name = 'Rye flour' WHERE organization_id = $1 AND id = $2", [org, product]);
    const t2 = await tokens(org);
    expect(t2.get("resources_suppliers")).toBe(t1.get("resources_suppliers"));
    expect(t2.get("resources_products")).not.toBe(t1.get("resources_products"));

    await pool.query("UPDATE suppliers SET city = 'Ghent' WHERE organization_id = $1 AND id = $2", [org, supplier]);
    const t3 = await tokens(org);
    expect(t3.get("resources_suppliers")).not.toBe(t2.get("resources_suppliers"));

    await pool.query("DELETE FROM suppliers WHERE organization_id = $1 AND id = $2", [org, supplier]);
    const t4 = await tokens(org);
    expect(t4.get("resources_suppliers")).not.toBe(t3.get("resources_suppliers"));
    expect(t4.get("resources_products")).toBe(t3.get("resources_products"));
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
});
