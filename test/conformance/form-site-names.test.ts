/**
 * Conformance, black-box over HTTP: a submission dataset's site_name / site_path read the site as it
 * stands (renamed → new name on a full re-read; deleted → empty name while site_id stays), without
 * moving the row's last_modified or cursor.
 */
import { startE2E, type E2E } from "../support/fixture";
import { field, formOrganization, idFactory, site, waitFor } from "../support/forms";

describe("conformance: form datasets read site names live", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  it("renamed and deleted sites show on a full re-read; last_modified and cursors stay", async () => {
    const id = idFactory();
    const org = await formOrganization(e2e, {
      sites: [site(id("site:a"), "Plant A"), site(id("site:b"), "Plant B")],
      forms: [{ id: id("form"), name: "Site Probe", recordPrefix: "SP", fields: [field.text(id("f:note"), "note")] }],
    });
    await org.waitForDataset("site_probe");
    await org.apply({
      submissions: [
        { id: id("sub:1"), formId: id("form"), siteId: id("site:a"), status: "Completed", values: { note: "one" } },
        { id: id("sub:2"), formId: id("form"), siteId: id("site:b"), status: "Completed", values: { note: "two" } },
      ],
    });
    const before = await waitFor("both submissions exported", async () => {
      const page = await org.page("site_probe");
      return page.rows.length === 2 ? page.rows : undefined;
    });
    const byId = (rows: Record<string, string>[]) => new Map(rows.map((r) => [r.id, r]));
    expect(byId(before).get(id("sub:1"))).toMatchObject({ site_name: "Plant A", site_path: id("site:a") });

    await e2e.pool.query("UPDATE sites SET name = 'Plant A (renamed)' WHERE organization_id = $1 AND id = $2", [org.organizationId, id("site:a")]);
    await e2e.pool.query("DELETE FROM sites WHERE organization_id = $1 AND id = $2", [org.organizationId, id("site:b")]);

    const after = byId((await org.page("site_probe")).rows);
    expect(after.get(id("sub:1"))).toMatchObject({ site_name: "Plant A (renamed)", site_id: id("site:a") });
    expect(after.get(id("sub:2"))).toMatchObject({ site_name: "", site_path: "", site_id: id("site:b") });
    // Pages of one row read site names by the join, larger ones from the organization's site map
    // (docs/export.md, "Site names"): both read the sites as they stand.
    const oneByOne = byId((await org.pageAll("site_probe", 1)).rows);
    for (const [rowId, row] of after) expect(oneByOne.get(rowId)).toEqual(row);
    for (const row of before) {
      expect(after.get(row.id)?.last_modified).toBe(row.last_modified);
      expect(after.get(row.id)?._cursor).toBe(row._cursor);
    }
  });
});
