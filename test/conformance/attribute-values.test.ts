/**
 * Conformance, black-box over HTTP: custom attribute values that do not fit their type export as an
 * empty cell (only that cell), per the custom attribute table of docs/contract.md §8.
 */
import { randomUUID } from "node:crypto";
import { startE2E, type E2E } from "../support/fixture";
import { csv } from "./helpers";

describe("conformance: custom attribute values", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  it("MultiSelect: a JSON array of the stored option keys, sorted; anything else is an empty cell", async () => {
    const { organizationId, secret } = await e2e.newOrganization();
    const attribute = randomUUID();
    await e2e.pool.query(
      "INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, $2, 'suppliers', 'Regions', 'Regions', 'MultiSelect')",
      [organizationId, attribute],
    );
    const cases: Array<[string, unknown, string]> = [
      ["sorted", ["north", "east", "South"], '["South", "east", "north"]'],
      ["empty", [], "[]"],
      ["a string", "north", ""],
      ["numbers", [3, 1], ""],
      ["nested", [["north"]], ""],
      ["null element", [null], ""],
      ["object", { a: 1 }, ""],
    ];
    for (const [name, value] of cases) {
      await e2e.pool.query("INSERT INTO suppliers (organization_id, id, name, attributes) VALUES ($1, gen_random_uuid(), $2, $3)", [
        organizationId,
        name,
        JSON.stringify({ [attribute]: value }),
      ]);
    }
    const res = await fetch(`${e2e.baseUrl}/v1/datasets/resources_suppliers/csv`, { headers: { Authorization: `Bearer ${secret}` } });
    const page = await csv(res);
    const byName = new Map(page.rows.map((r) => [r.name, r]));
    for (const [name, , expected] of cases) {
      expect({ name, regions: byName.get(name)?.regions }).toEqual({ name, regions: expected });
      // Only that cell: the row itself is exported.
      expect(byName.get(name)?.id).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});
