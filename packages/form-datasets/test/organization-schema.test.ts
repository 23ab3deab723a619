import type { Pool } from "pg";
import { buildDataset, organizationSchemaName, type FormField } from "../src";
import { createTestOrganization, insertForm, insertSubmission, registryRow, testPool, uuid } from "./support";

/** Each organization's form dataset tables live in a schema of its own (issue 15.5). */
let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(async () => {
  await pool.end();
});

const fields = (): FormField[] => [{ id: uuid(), key: "temperature", label: "Temperature", type: "number" } as FormField];

async function builtForm(): Promise<{ org: string; table: string }> {
  const org = await createTestOrganization(pool);
  const formId = await insertForm(pool, org, "Cold Room", fields());
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  await insertSubmission(pool, org, formId);
  await buildDataset(pool, org, formId);
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  const entry = await registryRow(pool, org, "cold_room");
  return { org, table: entry.table_name! };
}

describe("per-organization schemas", () => {
  it("names the schema after the organization and refuses anything else", () => {
    expect(organizationSchemaName("0B8E3A5C-1D2F-4A6B-8C9D-0E1F2A3B4C5D")).toBe("form_ds_0b8e3a5c1d2f4a6b8c9d0e1f2a3b4c5d");
    expect(() => organizationSchemaName("x; DROP SCHEMA public")).toThrow(/not an organization id/);
  });

  it("builds two organizations' tables into two schemas", async () => {
    const a = await builtForm();
    const b = await builtForm();
    expect(a.table.split(".")[0]).toBe(organizationSchemaName(a.org));
    expect(b.table.split(".")[0]).toBe(organizationSchemaName(b.org));
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${a.table}`)).rows[0].n).toBe(1);
  });

  it("moves a table built before per-organization schemas (in form_ds) with form_ds.move_tables_to_organization_schemas", async () => {
    const { org, table } = await builtForm();
    // As an earlier build left it: the table in form_ds, the registry naming it there.
    const legacy = `form_ds.${table.split(".")[1]}`;
    await pool.query(`ALTER TABLE ${table} SET SCHEMA form_ds`);
    await pool.query("UPDATE form_ds.dataset_tables SET table_name = $2 WHERE organization_id = $1 AND table_name = $3", [org, legacy, table]);
    await pool.query("UPDATE dataset_registry SET table_name = $2 WHERE organization_id = $1 AND table_name = $3", [org, legacy, table]);

    let moved = 0;
    for (let n = -1; n !== 0; ) {
      n = (await pool.query<{ n: number }>("SELECT form_ds.move_tables_to_organization_schemas(50) AS n")).rows[0].n;
      moved += n;
    }
    expect(moved).toBeGreaterThanOrEqual(1);
    expect((await registryRow(pool, org, "cold_room")).table_name).toBe(table);
    const registered = await pool.query("SELECT table_name FROM form_ds.dataset_tables WHERE organization_id = $1", [org]);
    expect(registered.rows).toEqual([{ table_name: table }]);
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n).toBe(1);
    expect((await pool.query("SELECT to_regclass($1) AS t", [legacy])).rows[0].t).toBeNull();
  });
});
