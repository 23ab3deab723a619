/** The organizations and comparisons the sync client suites share. */
import { startE2E, type E2E } from "../../support/fixture";
import { field, formOrganization, idFactory, pageAll, site, waitFor, type FormOrganization } from "../../support/forms";
import { copyRows, newTarget, normalizeExportRow, rowKey, withTarget, type TargetDb } from "./harness";

/** A suite's stack (started once) and the copy databases its tests open, all dropped afterwards. */
export function syncClientStack() {
  let e2e: E2E | undefined;
  const targets: TargetDb[] = [];
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(async () => {
    for (const t of targets) await t.drop().catch(() => undefined);
    await e2e?.stop();
  });
  return {
    get e2e(): E2E {
      if (!e2e) throw new Error("the stack is not started (beforeAll failed)");
      return e2e;
    },
    async target(kind: TargetDb["kind"] = "postgres"): Promise<TargetDb> {
      const t = await newTarget(kind);
      targets.push(t);
      return t;
    },
  };
}

/** Every listed dataset of the organization copied equal to the export, value by value. */
export async function expectCopyEqualsSource(org: Pick<FormOrganization, "listing" | "page">, db: TargetDb, skip: string[] = []) {
  const listing = await org.listing();
  for (const ds of listing) {
    if (skip.includes(ds.key)) continue;
    const { rows } = await pageAll((p) => org.page(ds.key, p), 5000);
    const columns = ds.columns.map((c) => c.key).filter((k) => k !== "_cursor");
    const booleans = new Set(ds.columns.filter((c) => c.dataType === "boolean").map((c) => c.key));
    const numbers = new Set(ds.columns.filter((c) => c.dataType === "number").map((c) => c.key));
    const expected = rows.map((r) => normalizeExportRow(r, columns, booleans, db.kind, numbers)).sort((a, b) => rowKey(a).localeCompare(rowKey(b)));
    const actual = rows.length === 0 && !(await withTarget(db.url, (t) => t.countRows(ds.key))) ? [] : await copyRows(db, ds.key, columns);
    actual.sort((a, b) => rowKey(a).localeCompare(rowKey(b)));
    expect({ dataset: ds.key, rows: actual }).toEqual({ dataset: ds.key, rows: expected });
  }
}

/** A form with a grid and two submissions, plus two suppliers, in an organization of its own. */
export async function hygieneOrg(e2e: E2E) {
  const id = idFactory();
  const form = (name = "Hygiene Round", extra: any[] = []) => ({
    id: id("form"), name, recordPrefix: "HR",
    fields: [
      field.text(id("f:area"), "area", "Area"),
      field.number(id("f:score"), "score", "Score"),
      field.grid(id("f:items"), "items", "Items", [field.text(id("f:item"), "item", "Item")]),
      ...extra,
    ],
  });
  const submission = (n: number, values: Record<string, unknown>) => ({
    id: id(`sub:${n}`), formId: id("form"), siteId: id("site"), status: "Completed" as const, completedAt: `2024-04-0${n}T10:00:00Z`, values,
  });
  const org = await formOrganization(e2e, { sites: [site(id("site"), "Main Site", "Europe/Berlin")], forms: [form()] });
  await org.waitForDataset("hygiene_round");
  await org.apply({
    suppliers: [
      { id: id("sup:1"), name: "Acme" },
      { id: id("sup:2"), name: "Globex" },
    ],
    submissions: [
      submission(1, { area: "Bakery", score: 7, items: [{ item: "floor" }, { item: "walls" }, { item: "ceiling" }] }),
      submission(2, { area: "Packing", score: 9, items: [{ item: "belt" }] }),
    ],
  });
  await waitFor("both submissions exported", async () => (await org.page("hygiene_round")).rows.length === 2);
  return { id, org, form, submission };
}
