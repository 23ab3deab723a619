import { randomUUID } from "node:crypto";
import type { PoolClient } from "pg";
import { FIXED_DATASETS, RegistryKeyConflictError, upsertRegistryRows } from "@exportsvc/datasets";
import { testPool } from "../../../test/support/db";
import { fixedDatasetsSyncer } from "../src";

/**
 * A registry sync writes an organization's changed rows in one statement, not one per row: under a
 * fleet build on a loaded machine the sync's time is its round trips (docs/scale-out.md, "One node's
 * ceiling"). Everything runs in one transaction that is rolled back, so no other suite's queue
 * worker can see (and sync) the organization first.
 */
describe("registry sync statements", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  /** The client whose `query` calls are recorded (the statement text of each). */
  function recording(client: PoolClient, statements: string[]): PoolClient {
    return new Proxy(client, {
      get(target, prop) {
        if (prop === "query") {
          return (text: string | { text: string }, values?: unknown[]) => {
            statements.push(typeof text === "string" ? text : text.text);
            return target.query(text as string, values);
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  async function inRolledBackTransaction(body: (client: PoolClient, org: string) => Promise<void>): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const org = randomUUID();
      await client.query("INSERT INTO organizations (id, name) VALUES ($1, 'sync statements')", [org]);
      await client.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true)", [org]);
      await body(client, org);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  }

  const syncCounting = async (client: PoolClient, org: string) => {
    const statements: string[] = [];
    const changed = await fixedDatasetsSyncer.sync(recording(client, statements), org);
    return { changed, registryWrites: statements.filter((s) => /INSERT INTO dataset_registry/.test(s)).length };
  };

  it("writes a fresh organization's fixed datasets in one statement, and nothing when nothing changed", async () => {
    await inRolledBackTransaction(async (client, org) => {
      expect(await syncCounting(client, org)).toEqual({ changed: FIXED_DATASETS.length, registryWrites: 1 });
      const rows = await client.query("SELECT key, generation, state FROM dataset_registry WHERE organization_id = $1 ORDER BY key", [org]);
      expect(rows.rows.map((r) => r.key)).toEqual(FIXED_DATASETS.map((d) => d.key).sort());
      expect(rows.rows.every((r) => r.generation === 1 && r.state === "ready")).toBe(true);

      expect(await syncCounting(client, org)).toEqual({ changed: 0, registryWrites: 0 });

      // One attribute changes one dataset's shape: one row written, its generation moved.
      await client.query("INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, gen_random_uuid(), 'lots', 'x', 'X', 'Text')", [org]);
      expect(await syncCounting(client, org)).toEqual({ changed: 1, registryWrites: 1 });
      const lots = await client.query("SELECT generation, columns FROM dataset_registry WHERE organization_id = $1 AND key = 'resources_lots'", [org]);
      expect(lots.rows[0].generation).toBe(2);
      expect((lots.rows[0].columns as { key: string }[]).map((c) => c.key)).toContain("x");
    });
  });

  it("still refuses to take over another dataset's key when rows are written together", async () => {
    await inRolledBackTransaction(async (client, org) => {
      await fixedDatasetsSyncer.sync(client, org);
      const row = (key: string, sourceRef: string) => ({ key, kind: "submission" as const, sourceRef, columns: [], nameAssignments: {}, generation: 1, state: "ready" as const });
      await expect(upsertRegistryRows(client, org, [row("free_key", "form-a"), row("resources_lots", "form-b")])).rejects.toBeInstanceOf(RegistryKeyConflictError);
      await expect(upsertRegistryRows(client, org, [row("free_key", "form-a"), row("resources_lots", "form-b")])).rejects.toThrow(/'resources_lots'/);
    });
  });
});
