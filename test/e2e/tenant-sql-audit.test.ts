import { tenantViolations } from "../support/tenant-sql-audit";

/** The checker behind the SQL audit of stack.e2e.test.ts (issue 15.5) finds what it must find. */
describe("tenant SQL audit", () => {
  const tables = ["submissions", "dataset_registry", "form_dataset_changes", "form_ds.dataset_tables"];
  const check = (text: string, allowed: RegExp[] = []) => tenantViolations([{ app: "test", text }], tables, allowed).map((v) => v.tables);

  it("passes statements keyed by one organization", () => {
    expect(check("SELECT * FROM submissions WHERE organization_id = $1 AND id = $2")).toEqual([]);
    expect(check('COPY (SELECT * FROM "form_ds_0b8e3a5c1d2f4a6b8c9d0e1f2a3b4c5d"."t_ab_g1" t WHERE t.organization_id = \'0b8e3a5c-1d2f-4a6b-8c9d-0e1f2a3b4c5d\') TO STDOUT')).toEqual([]);
    expect(check("INSERT INTO dataset_registry (organization_id, key) VALUES ($1, $2)")).toEqual([]);
    expect(check("SELECT 1 FROM organizations WHERE id = $1")).toEqual([]);
  });

  it("flags reads and writes of tenant tables without an organization equality", () => {
    expect(check("DELETE FROM form_dataset_changes WHERE seq = ANY($1::bigint[])")).toEqual([["form_dataset_changes"]]);
    expect(check("SELECT r.key FROM dataset_registry r JOIN submissions s ON s.organization_id = r.organization_id")).toEqual([["dataset_registry", "submissions"]]);
    expect(check("SELECT * FROM form_dataset_changes WHERE ($1::uuid IS NULL OR organization_id = $1) ORDER BY seq LIMIT 1")).toEqual([["form_dataset_changes"]]);
    expect(check('SELECT * FROM "form_ds_0b8e3a5c1d2f4a6b8c9d0e1f2a3b4c5d"."t_ab_g1" WHERE id = $1')).toEqual([["form_ds_0b8e3a5c1d2f4a6b8c9d0e1f2a3b4c5d.t_ab_g1"]]);
    expect(check("UPDATE form_ds.dataset_tables SET staged = false WHERE table_name = $1")).toEqual([["form_ds.dataset_tables"]]);
  });

  it("lets documented exceptions through", () => {
    expect(check("DELETE FROM form_dataset_changes WHERE seq = 1", [/^DELETE FROM form_dataset_changes WHERE seq = 1$/])).toEqual([]);
  });
});
