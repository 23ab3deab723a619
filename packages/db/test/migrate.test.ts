import { migrate } from "../src";
import { createTestOrganization, testPool } from "../../../test/support/db";

describe("migrations and change tracking", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("are idempotent", async () => {
    expect(await migrate(pool)).toEqual([]);
  });

  it("bump a dataset's change counter on insert, update and delete of its own rows only", async () => {
    const org = await createTestOrganization(pool);
    const version = async (dataset: string) =>
      Number((await pool.query("SELECT version FROM dataset_changes WHERE organization_id = $1 AND dataset = $2", [org, dataset])).rows[0]?.version ?? 0);
    await pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'A')", [org]);
    expect(await version("resources_suppliers")).toBe(1);
    await pool.query("UPDATE suppliers SET name = 'B' WHERE organization_id = $1", [org]);
    expect(await version("resources_suppliers")).toBe(2);
    await pool.query("DELETE FROM suppliers WHERE organization_id = $1", [org]);
    expect(await version("resources_suppliers")).toBe(3);
    expect(await version("resources_products")).toBe(0);
    // A statement touching no rows changes nothing.
    await pool.query("UPDATE suppliers SET name = 'C' WHERE organization_id = $1", [org]);
    expect(await version("resources_suppliers")).toBe(3);
  });

  it("converts ill-fitting values to NULL instead of failing", async () => {
    const r = await pool.query(
      "SELECT export_try_numeric('abc') AS n1, export_number_text(export_try_numeric('12.50')) AS n2, export_try_date('2024-02-30') AS d1, export_try_date('2024-02-29')::text AS d2, export_try_timestamptz('2024-01-01 10:00') AS t1, export_try_timestamptz('2024-01-01T10:00:00.5Z')::text AS t2",
    );
    expect(r.rows[0]).toEqual({ n1: null, n2: "12.5", d1: null, d2: "2024-02-29", t1: null, t2: "2024-01-01 10:00:00.5+00" });
  });
});
