/**
 * The per-request statements run as statements PostgreSQL keeps prepared per connection
 * (preparedStatement in @exportsvc/common; docs/export.md "Per-request statements"), and answer the
 * same once PostgreSQL has switched them to a generic plan (after five executions).
 */
import { randomUUID } from "node:crypto";
import { preparedStatement } from "@exportsvc/common";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { loadCurrentRegistryEntry } from "../src/registry";
import { pageHorizon } from "../src/visibility";

describe("preparedStatement", () => {
  it("names a text by its label and a hash of the text", () => {
    const a = preparedStatement("page-horizon", "SELECT 1");
    expect(a).toEqual({ name: expect.stringMatching(/^page-horizon-[0-9a-f]{12}$/), text: "SELECT 1" });
    expect(preparedStatement("page-horizon", "SELECT 1").name).toBe(a.name);
    expect(preparedStatement("page-horizon", "SELECT 2").name).not.toBe(a.name);
  });

  it("refuses a label that is not lower-case words joined by '-'", () => {
    expect(() => preparedStatement("Page Horizon", "SELECT 1")).toThrow(/lower-case words/);
    expect(() => preparedStatement("", "SELECT 1")).toThrow(/lower-case words/);
  });
});

describe("per-request statements in PostgreSQL", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("are prepared once per connection and answer alike under the generic plan", async () => {
    const org = await createTestOrganization(pool);
    const formId = randomUUID();
    const client = await pool.connect();
    try {
      const syncs: string[] = [];
      const sync = async (o: string) => void syncs.push(o);
      const first = await loadCurrentRegistryEntry(client, org, "resources_suppliers", sync);
      const firstHorizon = await pageHorizon(client, org, formId);
      const prepared = (await client.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.map((r) => r.name);
      for (const label of ["registry-entry-if-current", "registry-entry", "page-horizon", "page-pending"]) {
        expect(prepared.filter((n) => n.startsWith(`${label}-`) && /-[0-9a-f]{12}$/.test(n) && n.length === label.length + 13)).toHaveLength(1);
      }
      for (let i = 0; i < 8; i++) {
        expect(await loadCurrentRegistryEntry(client, org, "resources_suppliers", sync)).toEqual(first);
        const horizon = await pageHorizon(client, org, formId);
        expect(horizon.pendingSince).toBe(firstHorizon.pendingSince);
        expect(horizon.visibleBeforeMicros).toBeGreaterThanOrEqual(firstHorizon.visibleBeforeMicros);
      }
      // The organization has no registry rows: every call asked for a sync first (read-your-writes).
      expect(syncs).toHaveLength(9);
      const again = (await client.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.map((r) => r.name);
      expect(again).toEqual(prepared);
    } finally {
      client.release();
    }
  });
});
