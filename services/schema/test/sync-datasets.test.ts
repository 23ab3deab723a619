import { FIXED_DATASETS, shapeFingerprint } from "@exportsvc/datasets";
import { hash8 } from "@exportsvc/naming";
import { SchemaService } from "@exportsvc/proto";
import { createClient, type Client } from "@exportsvc/rpc";
import { createTestOrganization, testPool } from "../../../test/support/db";
import type { RunningSchemaService } from "../src";
import { DEFAULT_SYNCERS, syncOrganization } from "../src";
import { addAttribute, registryRows, startSchemaService } from "./support";

// Tests here assert states, not how many rows one call wrote: the queue worker (this service's and
// those of other suites sharing the database) may sync an organization at any moment as well.
describe("SyncDatasets (fixed datasets)", () => {
  const pool = testPool();
  let service: RunningSchemaService;
  let client: Client<typeof SchemaService>;
  const sync = async (org: string) => (await client.syncDatasets({ organizationId: org })).changed;

  beforeAll(async () => {
    service = await startSchemaService();
    client = createClient(SchemaService, `127.0.0.1:${service.port}`);
  });
  afterAll(async () => {
    client.close();
    await service.stop();
    await pool.end();
  });

  it("creates the twelve fixed datasets with their core columns, generation 1", async () => {
    const org = await createTestOrganization(pool);
    await sync(org);
    const rows = await registryRows(pool, org);
    expect([...rows.keys()].sort()).toEqual(FIXED_DATASETS.map((d) => d.key).sort());
    for (const def of FIXED_DATASETS) {
      const row = rows.get(def.key)!;
      expect(row.generation).toBe(1);
      expect(row.columns.map((c) => c.key)).toEqual(def.coreColumns.map((c) => c.key));
      expect(row.columns.every((c) => c.source.kind === "core" && c.source.name === c.key)).toBe(true);
      expect(row.shape_fingerprint).toBe(shapeFingerprint(def.coreColumns));
    }
    expect(rows.get("deviations")!.display_name).toBe("Deviations");
    expect(rows.get("resources_suppliers")!.display_name).toBeNull();
    const queued = await pool.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1", [org]);
    expect(queued.rowCount).toBe(0);
  });

  it("adds custom attribute columns after the core columns, ordered by position, typed and labelled", async () => {
    const org = await createTestOrganization(pool);
    const color = await addAttribute(pool, org, { kind: "suppliers", key: "Color", name: "Colour of goods", position: 2 });
    const weight = await addAttribute(pool, org, { kind: "suppliers", key: "net-weight", name: "Net weight", type: "Number", position: 1 });
    await addAttribute(pool, org, { kind: "suppliers", key: "audit date", name: "Audit", type: "Date", position: 3 });
    await addAttribute(pool, org, { kind: "suppliers", key: "approved_local", name: "Approved", type: "DateTime", position: 4 });
    await addAttribute(pool, org, { kind: "suppliers", key: "certs", name: "Certificates", type: "MultiSelect", position: 5 });
    await addAttribute(pool, org, { kind: "products", key: "shelf", name: "Shelf", position: 0 });
    await sync(org);
    const rows = await registryRows(pool, org);
    const suppliers = rows.get("resources_suppliers")!;
    const core = FIXED_DATASETS.find((d) => d.key === "resources_suppliers")!.coreColumns.length;
    expect(suppliers.columns.slice(core).map((c) => [c.key, c.dataType, c.label])).toEqual([
      ["net_weight", "number", "Net weight"],
      ["color", "text", "Colour of goods"],
      ["audit_date", "date", "Audit"],
      ["approved_local", "dateTime", "Approved"],
      ["certs", "text", "Certificates"],
    ]);
    expect(suppliers.columns[core].source).toEqual({ kind: "attribute", attributeId: weight, attributeType: "Number" });
    expect(suppliers.name_assignments[color]).toBe("color");
    expect(rows.get("resources_products")!.columns.at(-1)!.key).toBe("shelf");
    expect(rows.get("resources_customers")!.columns.map((c) => c.key)).not.toContain("shelf");
  });

  it("suffixes clashes with core and reserved names, and hashes overflowing keys", async () => {
    const org = await createTestOrganization(pool);
    const long = "Supplier certification renewal reminder lead time in working days";
    await addAttribute(pool, org, { kind: "suppliers", key: "Row Index", position: 1 });
    await addAttribute(pool, org, { kind: "suppliers", key: "Name", position: 2 });
    await addAttribute(pool, org, { kind: "suppliers", key: "status", position: 3 });
    await addAttribute(pool, org, { kind: "suppliers", key: "ID", position: 4 });
    await addAttribute(pool, org, { kind: "suppliers", key: "row_seq", position: 5 });
    await addAttribute(pool, org, { kind: "suppliers", key: long, position: 6 });
    await addAttribute(pool, org, { kind: "suppliers", key: "Name", position: 7 });
    // record_id and site_id are ordinary attributes on suppliers (not its core columns).
    await addAttribute(pool, org, { kind: "suppliers", key: "record_id", position: 8 });
    await sync(org);
    const suppliers = (await registryRows(pool, org)).get("resources_suppliers")!;
    const keys = suppliers.columns.filter((c) => c.source.kind === "attribute").map((c) => c.key);
    const normalizedLong = long.toLowerCase().replace(/ /g, "_");
    expect(normalizedLong.length).toBeGreaterThan(63);
    expect(keys).toEqual([
      "row_index_2",
      "name_2",
      "status_2",
      "id_2",
      "row_seq_2",
      `${normalizedLong.slice(0, 54)}_${hash8(normalizedLong)}`,
      "name_3",
      "record_id",
    ]);
    expect(keys.every((k) => k.length <= 63)).toBe(true);
  });

  it("keeps attribute column names stable as attributes are added and removed", async () => {
    const org = await createTestOrganization(pool);
    const first = await addAttribute(pool, org, { kind: "lots", key: "grade", position: 5 });
    await sync(org);
    const before = (await registryRows(pool, org)).get("resources_lots")!;

    // A new attribute with the same key, ordered before the first: the first keeps the plain name.
    const second = await addAttribute(pool, org, { kind: "lots", key: "Grade", position: 1 });
    await sync(org);
    const added = (await registryRows(pool, org)).get("resources_lots")!;
    expect(added.name_assignments).toEqual({ [first]: "grade", [second]: "grade_2" });
    expect(added.columns.slice(-2).map((c) => c.key)).toEqual(["grade_2", "grade"]);
    expect(added.generation).toBe(before.generation + 1);

    // Removing the plain holder leaves the other on its suffixed name.
    await pool.query("DELETE FROM custom_attribute_definitions WHERE organization_id = $1 AND id = $2", [org, first]);
    await sync(org);
    const removed = (await registryRows(pool, org)).get("resources_lots")!;
    expect(removed.name_assignments).toEqual({ [second]: "grade_2" });
    expect(removed.columns.at(-1)!.key).toBe("grade_2");
    expect(removed.generation).toBe(added.generation + 1);
  });

  it("writes nothing at all when nothing changed", async () => {
    const org = await createTestOrganization(pool);
    await addAttribute(pool, org, { kind: "equipment", key: "voltage", type: "Number" });
    await sync(org);
    const before = await registryRows(pool, org);
    expect(await sync(org)).toBe(0);
    expect(await syncOrganization(pool, org, DEFAULT_SYNCERS)).toBe(0);
    const after = await registryRows(pool, org);
    for (const [key, row] of before) expect(after.get(key)!.xmin).toBe(row.xmin);
  });

  it("rewrites only the label on a rename, and bumps the generation on a retype", async () => {
    const org = await createTestOrganization(pool);
    const id = await addAttribute(pool, org, { kind: "chemicals", key: "hazard", name: "Hazard" });
    await sync(org);
    const before = (await registryRows(pool, org)).get("resources_chemicals")!;

    await pool.query("UPDATE custom_attribute_definitions SET name = 'Hazard class' WHERE organization_id = $1 AND id = $2", [org, id]);
    await sync(org);
    const relabelled = (await registryRows(pool, org)).get("resources_chemicals")!;
    expect(relabelled.columns.at(-1)!.label).toBe("Hazard class");
    expect(relabelled.generation).toBe(before.generation);
    expect(relabelled.shape_fingerprint).toBe(before.shape_fingerprint);

    await pool.query("UPDATE custom_attribute_definitions SET type = 'Number' WHERE organization_id = $1 AND id = $2", [org, id]);
    await sync(org);
    const retyped = (await registryRows(pool, org)).get("resources_chemicals")!;
    expect(retyped.columns.at(-1)!.dataType).toBe("number");
    expect(retyped.generation).toBe(before.generation + 1);
    expect(retyped.shape_fingerprint).not.toBe(before.shape_fingerprint);
  });

  it("is safe when several syncs of one organization run at once", async () => {
    const org = await createTestOrganization(pool);
    await addAttribute(pool, org, { kind: "areas", key: "zone" });
    // The queue worker may join in too (the attribute insert notified it).
    const results = await Promise.all(Array.from({ length: 6 }, () => sync(org)));
    expect(results.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(FIXED_DATASETS.length);
    const rows = await registryRows(pool, org);
    expect(rows.size).toBe(FIXED_DATASETS.length);
    expect(rows.get("resources_areas")!.columns.at(-1)!.key).toBe("zone");
  });

  it("stays consistent while attribute changes, RPC syncs and the queue worker interleave", async () => {
    const org = await createTestOrganization(pool);
    const busyWorker = await startSchemaService({ REGISTRY_POLL_MS: "50" });
    try {
      await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          await addAttribute(pool, org, { kind: "customers", key: `attr ${i}`, position: i });
          await sync(org);
        }),
      );
      await sync(org);
      const customers = (await registryRows(pool, org)).get("resources_customers")!;
      const keys = customers.columns.filter((c) => c.source.kind === "attribute").map((c) => c.key);
      expect(keys).toEqual(Array.from({ length: 12 }, (_, i) => `attr_${i}`));
    } finally {
      await busyWorker.stop();
    }
  });

  it("rejects an organization id that is not a uuid", async () => {
    await expect(client.syncDatasets({ organizationId: "nope" })).rejects.toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
  });
});
