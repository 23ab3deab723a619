import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Pool } from "pg";
import { applyDocument, demoDocument, demoHistoryDocument, ExportctlError, readDocumentText, type ApplyDocumentInput } from "@exportsvc/exportctl";
import { createTestOrganization, testPool } from "../../../test/support/db";

let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(() => pool.end());

const counters = async (org: string) =>
  Object.fromEntries(
    (await pool.query<{ dataset: string; version: string }>("SELECT dataset, version FROM dataset_changes WHERE organization_id = $1", [org])).rows.map((r) => [r.dataset, r.version]),
  );
/** Rewrite log entries (migration 120) per kind of change: what the rewrite feeds will serve rows for. */
const rewriteCounters = async (org: string) =>
  Object.fromEntries(
    (await pool.query<{ kind: string; n: string }>("SELECT kind, count(*)::text AS n FROM dataset_rewrite_log WHERE organization_id = $1 GROUP BY kind", [org])).rows.map((r) => [r.kind, r.n]),
  );
const stamps = async (org: string, table: string) =>
  (await pool.query<{ id: string; lm: string }>(`SELECT id::text, last_modified::text AS lm FROM ${table} WHERE organization_id = $1 ORDER BY id`, [org])).rows;
const counts = async (org: string) => {
  const tables = ["sites", "suppliers", "products", "lots", "submissions", "deviations", "form_versions", "supplier_products"];
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = Number((await pool.query(`SELECT count(*) FROM ${t} WHERE organization_id = $1`, [org])).rows[0].count);
  return out;
};

async function expectRejected(doc: unknown, code: string, messagePart: RegExp): Promise<void> {
  const err = await applyDocument(pool, doc).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExportctlError);
  expect((err as ExportctlError).code).toBe(code);
  expect((err as ExportctlError).message).toMatch(messagePart);
}

const ids = { site: randomUUID(), product: randomUUID(), supplier: randomUUID(), lot: randomUUID() };
function smallDoc(org: string): ApplyDocumentInput {
  return {
    organization: org,
    sites: [{ id: ids.site, name: "Plant", timeZone: "Europe/Berlin" }],
    products: [{ id: ids.product, name: "Flour", allergens: ["Gluten"], sites: [ids.site] }],
    suppliers: [{ id: ids.supplier, name: "Mill", products: [ids.product] }],
    lots: [{ id: ids.lot, code: "L-1", productId: ids.product, siteId: ids.site, quantity: 1.5 }],
  };
}

describe("applyDocument", () => {
  test("a site time zone PostgreSQL does not know is refused, naming the place; nothing is written", async () => {
    const org = await createTestOrganization(pool);
    const doc = smallDoc(org);
    // ICU (and so the document parser) knows this retired zone; PostgreSQL, which converts the exports, does not.
    doc.sites = [doc.sites![0], { id: randomUUID(), name: "Old plant", timeZone: "US/Pacific-New" }];
    await expectRejected(doc, "INVALID_DOCUMENT", /sites\[1\]\.timeZone: "US\/Pacific-New" is not a time zone PostgreSQL knows/);
    expect((await counts(org)).sites).toBe(0);
    // Names compare as PostgreSQL reads them (case-insensitively); blank stays allowed.
    doc.sites = [doc.sites[0], { id: doc.sites[1].id, name: "Old plant", timeZone: "america/los_angeles" }, { id: randomUUID(), name: "New plant", timeZone: "" }];
    await applyDocument(pool, doc);
    expect((await counts(org)).sites).toBe(3);
  });

  test("the demo document loads, and re-applying it moves no counter and no last_modified", async () => {
    const org = await createTestOrganization(pool);
    await applyDocument(pool, demoHistoryDocument(org));
    const first = await applyDocument(pool, demoDocument(org));
    expect(first.sections.suppliers.inserted).toBe(4);
    expect(first.sections.employees.deleted).toBe(1);
    const before = {
      counters: await counters(org),
      rewrites: await rewriteCounters(org),
      suppliers: await stamps(org, "suppliers"),
      subs: await stamps(org, "submissions"),
      devs: await stamps(org, "deviations"),
    };
    const again = await applyDocument(pool, demoDocument(org));
    for (const s of Object.values(again.sections)) expect(s.inserted + s.updated).toBe(0);
    expect(await counters(org)).toEqual(before.counters);
    expect(await rewriteCounters(org)).toEqual(before.rewrites);
    expect(await stamps(org, "suppliers")).toEqual(before.suppliers);
    expect(await stamps(org, "submissions")).toEqual(before.subs);
    expect(await stamps(org, "deviations")).toEqual(before.devs);
  });

  test("a changed relation alone restamps only that record and moves only its dataset", async () => {
    const org = await createTestOrganization(pool);
    await applyDocument(pool, smallDoc(org));
    const before = await counters(org);
    const rewritesBefore = await rewriteCounters(org);
    const lotsBefore = await stamps(org, "lots");
    const supplierBefore = await stamps(org, "suppliers");
    const doc = smallDoc(org);
    doc.suppliers![0].products = [];
    const r = await applyDocument(pool, doc);
    expect(r.sections.suppliers.updated).toBe(1);
    const after = await counters(org);
    expect(Number(after.resources_suppliers)).toBe(Number(before.resources_suppliers) + 1);
    // The product's `suppliers` column lost a name without the product's last_modified moving.
    expect(Number((await rewriteCounters(org)).product_links)).toBe(Number(rewritesBefore.product_links ?? 0) + 1);
    expect(after.resources_lots).toBe(before.resources_lots);
    expect(await stamps(org, "lots")).toEqual(lotsBefore);
    expect((await stamps(org, "suppliers"))[0].lm > supplierBefore[0].lm).toBe(true);
    expect((await pool.query("SELECT count(*) FROM supplier_products WHERE organization_id = $1", [org])).rows[0].count).toBe("0");
  });

  test("an edit that restates unchanged relations rewrites none of them: no rewrite counter moves", async () => {
    const org = await createTestOrganization(pool);
    await applyDocument(pool, demoHistoryDocument(org));
    await applyDocument(pool, demoDocument(org));
    const rewritesBefore = await rewriteCounters(org);
    const linksBefore = await pool.query("SELECT xmin::text, supplier_id::text, product_id::text FROM supplier_products WHERE organization_id = $1 ORDER BY 2, 3", [org]);
    expect(linksBefore.rows.length).toBeGreaterThan(0);
    const doc = demoDocument(org);
    // Every supplier gets a new city (their products unchanged); every submission a new start (its
    // steps unchanged, and deviations are raised on those steps).
    for (const supplier of doc.suppliers!) supplier.city = `${supplier.city ?? ""} (moved)`;
    for (const submission of doc.submissions!) submission.startedAt = "2024-01-02T03:04:05Z";
    const r = await applyDocument(pool, doc);
    expect(r.sections.suppliers.updated).toBe(doc.suppliers!.length);
    expect(r.sections.submissions.updated).toBe(doc.submissions!.length);
    expect(await rewriteCounters(org)).toEqual(rewritesBefore);
    // The link rows were not even rewritten (same row versions).
    expect((await pool.query("SELECT xmin::text, supplier_id::text, product_id::text FROM supplier_products WHERE organization_id = $1 ORDER BY 2, 3", [org])).rows).toEqual(linksBefore.rows);

    // A step whose status changes is rewritten, and the deviations raised on it now show another step_status.
    const withDeviations = new Set(doc.deviations!.map((d) => d.submissionId));
    const submission = doc.submissions!.find((s) => withDeviations.has(s.id) && s.steps?.some((st) => st.status === "Pending"))!;
    submission.steps = submission.steps!.map((st) => (st.status === "Pending" ? { ...st, status: "Completed" } : st));
    await applyDocument(pool, doc);
    // (Steps are replaced whole, a delete and an insert: logged once or twice; it has to be logged.)
    expect(Number((await rewriteCounters(org)).submission_steps)).toBeGreaterThan(Number(rewritesBefore.submission_steps ?? 0));
    expect(Number((await rewriteCounters(org)).product_links ?? 0)).toBe(Number(rewritesBefore.product_links ?? 0));
  });

  test("a changed custom attribute value restamps the record", async () => {
    const org = await createTestOrganization(pool);
    const attr = randomUUID();
    const doc: ApplyDocumentInput = {
      ...smallDoc(org),
      customAttributes: [{ id: attr, resourceKind: "suppliers", key: "Risk", name: "Risk", type: "Text" }],
    };
    doc.suppliers![0].attributes = { Risk: "low" };
    await applyDocument(pool, doc);
    const stored = await pool.query("SELECT attributes FROM suppliers WHERE organization_id = $1", [org]);
    expect(stored.rows[0].attributes).toEqual({ [attr]: "low" });
    doc.suppliers![0].attributes = { [attr]: "high" };
    expect((await applyDocument(pool, doc)).sections.suppliers.updated).toBe(1);
  });

  test("explicit lastModified values are stored exactly and count as state", async () => {
    const org = await createTestOrganization(pool);
    const doc = smallDoc(org);
    doc.lots![0].lastModified = "2024-01-02T03:04:05.123456Z";
    await applyDocument(pool, doc);
    expect((await stamps(org, "lots"))[0].lm).toBe("2024-01-02 03:04:05.123456+00");
    expect((await applyDocument(pool, doc)).sections.lots.unchanged).toBe(1);
    doc.lots![0].lastModified = "2024-01-02T03:04:06Z";
    expect((await applyDocument(pool, doc)).sections.lots.updated).toBe(1);
    expect((await stamps(org, "lots"))[0].lm).toBe("2024-01-02 03:04:06+00");
  });

  test("rejections name the place and leave the database untouched", async () => {
    const org = await createTestOrganization(pool);
    await applyDocument(pool, smallDoc(org));
    const before = { counts: await counts(org), counters: await counters(org) };
    const unknownProduct = randomUUID();

    const badRef = smallDoc(org);
    badRef.suppliers![0].name = "Changed";
    badRef.suppliers!.push({ id: randomUUID(), name: "Other", products: [ids.product, unknownProduct] });
    await expectRejected(badRef, "UNKNOWN_REFERENCE", new RegExp(`suppliers\\[1\\]\\.products\\[1\\]: unknown product ${unknownProduct}`));

    await expectRejected({ ...smallDoc(org), lots: [{ id: randomUUID(), code: "x", colour: "red" }] }, "INVALID_DOCUMENT", /lots\[0\]: unknown field\(s\) 'colour'/);
    await expectRejected({ organization: org, sites: [{ id: "not-a-uuid", name: "x" }] }, "INVALID_DOCUMENT", /sites\[0\]\.id: must be a uuid/);
    await expectRejected({ organization: org, teams: [{ id: randomUUID() }] }, "INVALID_DOCUMENT", /teams\[0\]\.name: is required/);
    await expectRejected(
      { organization: org, submissions: [{ id: randomUUID(), formId: randomUUID(), status: "Done" }] },
      "INVALID_DOCUMENT",
      /submissions\[0\]\.status/,
    );
    await expectRejected(
      { organization: org, deviations: [{ id: randomUUID(), submissionId: randomUUID(), severity: "Urgent" }] },
      "INVALID_DOCUMENT",
      /deviations\[0\]\.severity/,
    );
    await expectRejected({ organization: org, lots: [{ id: randomUUID(), expiryDate: "2024-02-30" }] }, "INVALID_DOCUMENT", /lots\[0\]\.expiryDate: is not a valid date/);
    await expectRejected({ organization: org, suppliers: [{ id: randomUUID(), attributes: { Nope: 1 } }] }, "UNKNOWN_REFERENCE", /suppliers\[0\]\.attributes\.Nope: no custom attribute/);
    await expectRejected({ organization: randomUUID() }, "NOT_FOUND", /does not exist/);
    await expectRejected(
      { organization: org, teams: [{ id: ids.site, name: "A" }, { id: ids.site, name: "B" }] },
      "INVALID_DOCUMENT",
      /teams\[1\]\.id: .* is already used by teams\[0\]/,
    );
    // A problem found only after writing started (a parent cycle) still rolls everything back.
    const [p, q] = [randomUUID(), randomUUID()];
    await expectRejected({ ...badRef, suppliers: [], sites: [{ id: p, parentId: q, name: "P" }, { id: q, parentId: p, name: "Q" }] }, "INVALID_DOCUMENT", /cycle/);

    expect(await counts(org)).toEqual(before.counts);
    expect(await counters(org)).toEqual(before.counters);
    expect((await pool.query("SELECT name FROM suppliers WHERE organization_id = $1", [org])).rows[0].name).toBe("Mill");
  });

  test("deletions are hard and leave references to the deleted records dangling", async () => {
    const org = await createTestOrganization(pool);
    await applyDocument(pool, smallDoc(org));
    const r = await applyDocument(pool, { organization: org, delete: { products: [ids.product], sites: [ids.site], suppliers: [ids.supplier] } });
    expect(r.sections.products.deleted).toBe(1);
    const c = await counts(org);
    expect([c.products, c.sites, c.suppliers, c.supplier_products]).toEqual([0, 0, 0, 0]);
    const lot = await pool.query("SELECT product_id::text, site_id::text FROM lots WHERE organization_id = $1", [org]);
    expect(lot.rows[0]).toEqual({ product_id: ids.product, site_id: ids.site });
    // A later document may point at the deleted product only by deleting it again (knowingly dangling).
    await expectRejected({ organization: org, lots: [{ id: ids.lot, productId: ids.product }] }, "UNKNOWN_REFERENCE", /lots\[0\]\.productId: unknown product/);
    const ok = await applyDocument(pool, { organization: org, lots: [{ id: ids.lot, code: "L-1", productId: ids.product }], delete: { products: [ids.product] } });
    expect(ok.sections.lots.updated).toBe(1);
    await expectRejected({ ...smallDoc(org), delete: { sites: [ids.site] } }, "INVALID_DOCUMENT", /delete\.sites\[0\]: .* is also declared in sites\[0\]/);
  });

  test("site and area paths run from the outermost ancestor to the record itself", async () => {
    const org = await createTestOrganization(pool);
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const [x, y] = [randomUUID(), randomUUID()];
    await applyDocument(pool, {
      organization: org,
      sites: [{ id: c, parentId: b, name: "C" }, { id: a, name: "A" }, { id: b, parentId: a, name: "B" }],
      areas: [{ id: y, parentId: x, siteId: c }, { id: x, siteId: a }],
    });
    const sites = Object.fromEntries((await pool.query("SELECT id::text, path FROM sites WHERE organization_id = $1", [org])).rows.map((r) => [r.id, r.path]));
    expect(sites).toEqual({ [a]: a, [b]: `${a}.${b}`, [c]: `${a}.${b}.${c}` });
    const areas = Object.fromEntries((await pool.query("SELECT id::text, path FROM areas WHERE organization_id = $1", [org])).rows.map((r) => [r.id, r.path]));
    expect(areas).toEqual({ [x]: x, [y]: `${x}.${y}` });
    // Moving B to the top rewrites the paths below it.
    await applyDocument(pool, { organization: org, sites: [{ id: b, name: "B" }] });
    expect((await pool.query("SELECT path FROM sites WHERE organization_id = $1 AND id = $2", [org, c])).rows[0].path).toBe(`${b}.${c}`);
    await expectRejected({ organization: org, sites: [{ id: a, parentId: c, name: "A" }, { id: b, parentId: a, name: "B" }] }, "INVALID_DOCUMENT", /cycle/);
  });

  test("a deviation's standalone comment changes without moving its last_modified; status changes restamp it", async () => {
    const org = await createTestOrganization(pool);
    const [form, submission, deviation] = [randomUUID(), randomUUID(), randomUUID()];
    const doc: ApplyDocumentInput = {
      organization: org,
      forms: [{ id: form, name: "Check", recordPrefix: "CHK", fields: [] }],
      submissions: [{ id: submission, formId: form }],
      deviations: [{ id: deviation, submissionId: submission, severity: "Low", comment: "first note" }],
    };
    const stored = async () =>
      (await pool.query<{ comment: string | null; status: string; lm: string }>("SELECT comment, status, last_modified::text AS lm FROM deviations WHERE organization_id = $1", [org])).rows[0];
    await applyDocument(pool, doc);
    const original = await stored();

    doc.deviations![0].comment = "changed note";
    expect((await applyDocument(pool, doc)).sections.deviations.updated).toBe(1);
    expect(await stored()).toEqual({ ...original, comment: "changed note" });

    delete doc.deviations![0].comment;
    expect((await applyDocument(pool, doc)).sections.deviations.updated).toBe(1);
    expect(await stored()).toEqual({ ...original, comment: null });

    Object.assign(doc.deviations![0], { status: "Resolved", resolutionType: "Comment", comment: "with the resolution" });
    expect((await applyDocument(pool, doc)).sections.deviations.updated).toBe(1);
    const resolved = await stored();
    expect(resolved).toMatchObject({ status: "Resolved", comment: "with the resolution" });
    expect(resolved.lm > original.lm).toBe(true);

    // An explicit lastModified still wins over the kept stamp.
    Object.assign(doc.deviations![0], { comment: "stamped explicitly", lastModified: "2024-01-02T03:04:05.123456Z" });
    await applyDocument(pool, doc);
    expect(await stored()).toEqual({ status: "Resolved", comment: "stamped explicitly", lm: "2024-01-02 03:04:05.123456+00" });

    // The resolution comment is part of the resolution: changing only it restamps.
    delete doc.deviations![0].lastModified;
    doc.deviations![0].resolutionComment = "fixed the probe";
    expect((await applyDocument(pool, doc)).sections.deviations.updated).toBe(1);
    expect((await stored()).lm > resolved.lm).toBe(true);
  });

  test("record ids and deviation codes are assigned per form and per organization, and kept", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const field = randomUUID();
    const [s1, s2, s3, d1, d2] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const doc: ApplyDocumentInput = {
      organization: org,
      forms: [{ id: form, name: "Check", recordPrefix: "CHK", fields: [{ id: field, key: "temp", label: "Temp", type: "number" }] }],
      submissions: [
        { id: s1, formId: form, values: { temp: 1 } },
        { id: s2, formId: form, recordId: "CHK-10", values: { [field]: 2 } },
      ],
      deviations: [{ id: d1, submissionId: s1, severity: "Low" }],
    };
    await applyDocument(pool, doc);
    await applyDocument(pool, { ...doc, submissions: [...doc.submissions!, { id: s3, formId: form }], deviations: [...doc.deviations!, { id: d2, submissionId: s3, severity: "High" }] });
    const subs = Object.fromEntries((await pool.query("SELECT id::text, record_id, form_version, \"values\" FROM submissions WHERE organization_id = $1", [org])).rows.map((r) => [r.id, r]));
    // Explicit record ids advance the counter first, so generated ones never repeat them.
    expect(subs[s1].record_id).toBe("CHK-11");
    expect(subs[s2].record_id).toBe("CHK-10");
    expect(subs[s3].record_id).toBe("CHK-12");
    expect(subs[s2].values).toEqual({ [field]: 2 });
    expect(subs[s1].form_version).toBe(1);
    const devs = Object.fromEntries((await pool.query("SELECT id::text, code FROM deviations WHERE organization_id = $1", [org])).rows.map((r) => [r.id, r.code]));
    expect(devs).toEqual({ [d1]: "DEV-1", [d2]: "DEV-2" });
  });

  test("submission values are checked against the form's fields and stored keyed by field id", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const [grid, inner, sel] = [randomUUID(), randomUUID(), randomUUID()];
    const base = {
      organization: org,
      forms: [{
        id: form, name: "F", recordPrefix: "F",
        fields: [
          { id: sel, key: "pick", label: "Pick", type: "select" as const, options: [{ key: "a", label: "A" }] },
          { id: grid, key: "rows", label: "Rows", type: "grid" as const, fields: [{ id: inner, key: "when", label: "When", type: "date" as const }] },
        ],
      }],
    };
    const sub = randomUUID();
    await applyDocument(pool, { ...base, submissions: [{ id: sub, formId: form, values: { pick: "a", rows: [{ when: "2024-05-01" }, { when: null }] } }] });
    const stored = await pool.query("SELECT \"values\" FROM submissions WHERE organization_id = $1", [org]);
    expect(stored.rows[0].values).toEqual({ [sel]: "a", [grid]: [{ [inner]: "2024-05-01" }, { [inner]: null }] });
    await expectRejected({ ...base, submissions: [{ id: sub, formId: form, values: { pick: "b" } }] }, "INVALID_DOCUMENT", /submissions\[0\]\.values\.pick: a select value must be one of the option keys a/);
    await expectRejected({ ...base, submissions: [{ id: sub, formId: form, values: { rows: [{ when: "May" }] } }] }, "INVALID_DOCUMENT", /submissions\[0\]\.values\.rows\[0\]\.when: a date value/);
    // Month 13 is no Date at all: rejected as a bad value, not a RangeError from toISOString.
    await expectRejected({ ...base, submissions: [{ id: sub, formId: form, values: { rows: [{ when: "2024-13-01" }] } }] }, "INVALID_DOCUMENT", /submissions\[0\]\.values\.rows\[0\]\.when: a date value/);
    await expectRejected({ ...base, submissions: [{ id: sub, formId: form, values: { nope: 1 } }] }, "INVALID_DOCUMENT", /values\.nope: the form has no field/);
  });

  test("publishing changed fields adds a published form version; unchanged fields add none", async () => {
    const org = await createTestOrganization(pool);
    const form = randomUUID();
    const f1 = { id: randomUUID(), key: "a", label: "A", type: "text" as const };
    const f2 = { id: randomUUID(), key: "b", label: "B", type: "number" as const };
    const doc = (fields: (typeof f1 | typeof f2)[], publish?: boolean) => ({ organization: org, forms: [{ id: form, name: "F", recordPrefix: "F", fields, publish }] });
    await applyDocument(pool, doc([f1]));
    await applyDocument(pool, doc([f1]));
    await applyDocument(pool, doc([f1, f2], false));
    const versions = async () => (await pool.query("SELECT version, published_at IS NOT NULL AS published, jsonb_array_length(fields) AS n FROM form_versions WHERE organization_id = $1 ORDER BY version", [org])).rows;
    expect(await versions()).toEqual([{ version: 1, published: true, n: 1 }, { version: 2, published: false, n: 2 }]);
    await applyDocument(pool, doc([f1, f2]));
    expect(await versions()).toEqual([{ version: 1, published: true, n: 1 }, { version: 2, published: true, n: 2 }]);
  });

  test("a resourceSelect value stores a snapshot of the record, taken once and kept on re-apply", async () => {
    const org = await createTestOrganization(pool);
    const [form, field, supplier, sub] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const doc = (supplierName: string): ApplyDocumentInput => ({
      organization: org,
      suppliers: [{ id: supplier, name: supplierName, status: "Approved" }],
      forms: [{ id: form, name: "Audit", recordPrefix: "AU", fields: [{ id: field, key: "supplier", label: "Supplier", type: "resourceSelect", resourceKind: "suppliers" }] }],
      submissions: [{ id: sub, formId: form, values: { supplier: { id: supplier } } }],
    });
    await applyDocument(pool, doc("Mill"));
    const value = async () => (await pool.query(`SELECT "values" -> $2 AS v FROM submissions WHERE organization_id = $1`, [org, field])).rows[0].v;
    expect(await value()).toMatchObject({ id: supplier, record: { id: supplier, name: "Mill", status: "Approved" } });
    const r = await applyDocument(pool, doc("Mill Renamed"));
    expect(r.sections.suppliers.updated).toBe(1);
    expect(r.sections.submissions.unchanged).toBe(1);
    expect((await value()).record.name).toBe("Mill");
    await expectRejected(
      { ...doc("Mill"), submissions: [{ id: sub, formId: form, values: { supplier: { id: randomUUID() } } }] },
      "UNKNOWN_REFERENCE",
      /submissions\[0\]\.values\.supplier\.id: unknown supplier/,
    );
  });

  test("the full example of docs/apply-format.md loads (into a fresh organization)", async () => {
    const org = await createTestOrganization(pool);
    const markdown = readFileSync(join(__dirname, "..", "..", "..", "docs", "apply-format.md"), "utf8");
    const yaml = /## Full example\s+```yaml\n([\s\S]*?)```/.exec(markdown)![1].replace("7b0c2f4e-1d3a-4c5b-8e6f-9a0b1c2d3e4f", org);
    const result = await applyDocument(pool, readDocumentText(yaml, "apply-format.md"));
    for (const section of ["sites", "suppliers", "documents", "forms", "submissions", "deviations", "recipes", "chemicals"]) {
      expect(result.sections[section].inserted).toBeGreaterThan(0);
    }
    const deviation = await pool.query("SELECT code, status, signed_at::text FROM deviations WHERE organization_id = $1", [org]);
    expect(deviation.rows).toEqual([{ code: "DEV-1", status: "Resolved", signed_at: "2024-05-02 11:01:00+00" }]);
  });
});

describe("apply declares the organization it writes (export visibility horizon, docs/export.md)", () => {
  it("runs its transaction under application_name '<name> org=<organization>'", async () => {
    const org = await createTestOrganization(pool);
    // Hold apply at its per-organization lock (taken right after it declares), then look at it.
    const blocker = await pool.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT pg_advisory_xact_lock(hashtext('exportctl-apply'), hashtext($1))", [org]);
      const applying = applyDocument(pool, smallDoc(org));
      let seen: string[] = [];
      for (let i = 0; i < 100 && seen.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        seen = (
          await pool.query<{ name: string }>("SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1", [`% org=${org}`])
        ).rows.map((r) => r.name);
      }
      expect(seen).toHaveLength(1);
      await blocker.query("COMMIT");
      await applying;
    } finally {
      blocker.release();
    }
    // The declaration ended with the transaction.
    const names = (await pool.query<{ name: string }>("SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '% org=%'")).rows;
    expect(names).toEqual([]);
  });
});
