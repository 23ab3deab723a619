/**
 * Conformance, black-box over HTTP: form datasets. docs/contract.md §6 "Form datasets: naming" and §7 "Form
 * datasets: columns" ("Columns per field type"), the lifecycle of a form dataset
 * (submissions added, edited, deleted; forms renamed, republished, deleted; a blank site time zone)
 * and tenant isolation. Read-only checks use the demo organization; every test that changes data
 * uses an organization of its own.
 */
import { startE2E, type E2E } from "../support/fixture";
import {
  ENVELOPE_COLUMNS, csvPath, field, formOrganization, idFactory, site, waitFor,
  type ApplyFields, type FormOrganization, type ListedDataset, type Row,
} from "../support/forms";
import { parseCsvPage } from "../support/csv";
import { problem } from "./helpers";

const DEMO_FORM_KEYS = ["supplier_audit", "supplier_audit__findings", "supplier_audit__findings__actions", "temperature_check"];

/** The naming rule of docs/contract.md §6, as an oracle for names below 63 characters. */
const normalize = (raw: string) => raw.toLowerCase().replace(/[\s-]/g, "_").replace(/[^a-z0-9_]/g, "").replace(/_+/g, "_");
const HASHED = /_[0-9a-z]{8}$/;

const columnOf = (d: ListedDataset, key: string) => {
  const c = d.columns.find((col) => col.key === key);
  if (!c) throw new Error(`${d.key} has no column ${key}; columns: ${d.columns.map((col) => col.key).join(", ")}`);
  return c;
};
const columnByLabel = (d: ListedDataset, label: string) => {
  const c = d.columns.find((col) => col.label === label);
  if (!c) throw new Error(`${d.key} has no column labelled ${label}`);
  return c;
};
const rowPosition = (r: Row) => [r.id, r.row_index, r.item];
const tokens = (datasets: ListedDataset[]) => new Map(datasets.map((d) => [d.key, d.changeToken]));

describe("conformance: form datasets", () => {
  let e2e: E2E;
  let demo: ListedDataset[];
  const demoDataset = (key: string) => {
    const d = demo.find((x) => x.key === key);
    if (!d) throw new Error(`demo listing has no ${key}`);
    return d;
  };
  const demoRows = async (key: string): Promise<Row[]> => {
    const res = await e2e.get(csvPath(key));
    if (res.status !== 200) throw new Error(`${key}: HTTP ${res.status}`);
    return parseCsvPage(Buffer.from(await res.arrayBuffer())).rows;
  };

  beforeAll(async () => {
    e2e = await startE2E();
    demo = await waitFor("the demo organization's form datasets", async () => {
      const res = await e2e.get("/v1/datasets");
      const body = (await res.json()) as ListedDataset[];
      return DEMO_FORM_KEYS.every((k) => body.some((d) => d.key === k)) ? body : undefined;
    });
  }, 120_000);
  afterAll(() => e2e?.stop());

  describe("listing", () => {
    it("a submission dataset's displayName is the bare form name", () => {
      expect(demoDataset("supplier_audit").displayName).toBe("Supplier Audit");
      expect(demoDataset("temperature_check").displayName).toBe("Temperature Check");
    });

    it("a grid dataset's displayName is '<form name> - <grid label>', one segment per nesting level", () => {
      expect(demoDataset("supplier_audit__findings").displayName).toBe("Supplier Audit - Findings");
      expect(demoDataset("supplier_audit__findings__actions").displayName).toBe("Supplier Audit - Findings - Actions");
    });

    it("parentDataset is on grid datasets only (one level up) and omitted, not null, on top-level datasets", () => {
      expect(demoDataset("supplier_audit__findings").parentDataset).toBe("supplier_audit");
      expect(demoDataset("supplier_audit__findings__actions").parentDataset).toBe("supplier_audit__findings");
      for (const key of ["supplier_audit", "temperature_check", "deviations", "resources_suppliers"]) {
        expect(Object.keys(demoDataset(key))).not.toContain("parentDataset");
      }
    });

    it("childDatasets is the inverse of parentDataset; a grid containing a grid is both child and parent", () => {
      for (const d of demo) {
        const children = demo.filter((c) => c.parentDataset === d.key).map((c) => c.key).sort();
        expect({ key: d.key, children: [...d.childDatasets].sort() }).toEqual({ key: d.key, children });
      }
      expect(demoDataset("supplier_audit").childDatasets).toEqual(["supplier_audit__findings"]);
      expect(demoDataset("supplier_audit__findings").childDatasets).toEqual(["supplier_audit__findings__actions"]);
      expect(demoDataset("supplier_audit__findings__actions").childDatasets).toEqual([]);
    });

    it("column labels follow the patterns of docs/contract.md §7 for every multi-column field type", () => {
      const audit = demoDataset("supplier_audit");
      const temp = demoDataset("temperature_check");
      const actions = demoDataset("supplier_audit__findings__actions");
      expect(columnOf(temp, "verification_temperature").label).toBe("Verification: Temperature (°C)");
      expect(columnOf(audit, "verification_auditor_signature").label).toBe("Verification: Auditor");
      expect(columnOf(audit, "auditor_signature_name").label).toBe("Auditor - Name");
      expect(columnOf(audit, "auditor_signature_date").label).toBe("Auditor - Date");
      expect(columnOf(audit, "supplier_id").label).toBe("Supplier - ID");
      expect(columnOf(audit, "supplier").label).toBe("Supplier");
      expect(columnOf(audit, "hygiene__floors").label).toBe("Hygiene - Floors clean");
      expect(columnOf(audit, "hygiene__pests").label).toBe("Hygiene - No pest activity");
      expect(columnOf(audit, "scope__haccp").label).toBe("Scope - HACCP");
      expect(columnOf(audit, "scope__traceability").label).toBe("Scope - Traceability");
      expect(columnOf(actions, "findings_row_index").label).toBe("Findings - Row Index");
      expect(columnOf(actions, "owner_id").label).toBe("Owner - ID");
      // A one-column field uses its own label.
      expect(columnOf(temp, "temperature").label).toBe("Temperature (°C)");
      // On form datasets every own column has a label.
      for (const key of DEMO_FORM_KEYS) {
        for (const c of demoDataset(key).columns.filter((col) => col.key !== "_cursor")) expect({ key: c.key, label: typeof c.label }).toEqual({ key: c.key, label: "string" });
      }
    });

    it("submission datasets start with the envelope columns and types of docs/contract.md §7, then the fields, then _cursor", () => {
      for (const key of ["supplier_audit", "temperature_check"]) {
        const d = demoDataset(key);
        const envelope = d.columns.slice(0, ENVELOPE_COLUMNS.length).map((c) => [c.key, c.dataType]);
        expect(envelope.sort()).toEqual([...ENVELOPE_COLUMNS].sort());
        expect(d.columns[d.columns.length - 1]).toMatchObject({ key: "_cursor", dataType: "text" });
        expect(d.columns.length).toBeGreaterThan(ENVELOPE_COLUMNS.length + 1);
      }
    });

    it("grid datasets have id (uuid), last_modified (dateTime) and row_index (number), not the submission envelope", () => {
      for (const key of ["supplier_audit__findings", "supplier_audit__findings__actions"]) {
        const d = demoDataset(key);
        expect(columnOf(d, "id").dataType).toBe("uuid");
        expect(columnOf(d, "last_modified").dataType).toBe("dateTime");
        expect(columnOf(d, "row_index").dataType).toBe("number");
        for (const envelopeOnly of ["record_id", "site_id", "status", "completed_at", "last_modified_local"]) {
          expect(d.columns.map((c) => c.key)).not.toContain(envelopeOnly);
        }
      }
    });

    it("row_index is only on grid datasets", () => {
      for (const d of demo) {
        const hasRowIndex = d.columns.some((c) => c.key === "row_index");
        expect({ key: d.key, hasRowIndex }).toEqual({ key: d.key, hasRowIndex: d.parentDataset !== undefined });
      }
    });

    it("columns per field type (docs/contract.md §7): keys and dataTypes", () => {
      const types = (d: ListedDataset) => Object.fromEntries(d.columns.map((c) => [c.key, c.dataType]));
      expect(types(demoDataset("temperature_check"))).toMatchObject({
        unit_name: "text", notes: "text", escalation_email: "text", escalation_phone: "text", check_time: "text",
        temperature: "number", verification_temperature: "localDateTime", within_limits: "boolean", check_date: "date",
        measured_at_local: "dateTime", // a field key ending in _local is still a UTC instant
      });
      expect(types(demoDataset("supplier_audit"))).toMatchObject({
        supplier: "text", supplier_id: "uuid", lot: "text", lot_id: "uuid", result: "text",
        scope__haccp: "boolean", scope__allergens: "boolean", scope__traceability: "boolean",
        hygiene__floors: "text", hygiene__pests: "text",
        auditor_signature_name: "text", auditor_signature_date: "dateTime", verification_auditor_signature: "localDateTime",
        attachments: "text", photos: "text",
      });
      // heading / instructions have no column; a grid has none in its parent.
      const tempKeys = demoDataset("temperature_check").columns.map((c) => c.key);
      expect(tempKeys).not.toContain("heading");
      expect(tempKeys).not.toContain("howto");
      expect(demoDataset("supplier_audit").columns.map((c) => c.key)).not.toContain("findings");
      expect(demoDataset("supplier_audit__findings").columns.map((c) => c.key)).not.toContain("actions");
    });

    it("columns per field type (docs/contract.md §7): values", async () => {
      const audit = (await demoRows("supplier_audit")).find((r) => r.record_id === "SA-1")!;
      expect(audit.result).toBe("Minor findings"); // select: the option's label
      expect([audit.scope__haccp, audit.scope__allergens, audit.scope__traceability]).toEqual(["t", "f", "t"]);
      expect([audit.hygiene__floors, audit.hygiene__pests]).toEqual(["Yes", "No"]); // survey: the answer's label
      expect(audit.auditor_signature_name).toBe("Ana Alvarez");
      expect(audit.auditor_signature_date).toBe("2024-05-18 11:44:00+00");
      expect(audit.attachments).toBe("report.pdf, checklist, signed.pdf");
      expect(JSON.parse(audit.supplier)).toMatchObject({ id: audit.supplier_id, name: "Northern Mills" });
      // Verified 12:00 UTC at Plant North (America/Chicago, CDT): the site-local wall clock.
      expect(audit.verification_auditor_signature).toBe("2024-05-18 07:00:00");
      const temps = await demoRows("temperature_check");
      const tc1 = temps.find((r) => r.record_id === "TC-1")!;
      const tc2 = temps.find((r) => r.record_id === "TC-2")!;
      expect(tc1.measured_at_local).toBe("2024-05-20 14:00:00+00");
      expect(tc1.verification_temperature).toBe("2024-05-20 10:00:00");
      expect(tc2.verification_temperature).toBe(""); // empty until verified
      expect(tc1.completed_at_local).toBe("2024-05-20 09:02:30.123456");
    });

    it("envelope values: record_id '<prefix>-<n>', status and is_archived from their value sets, site_path ending with site_id", async () => {
      for (const [key, prefix] of [["temperature_check", "TC"], ["supplier_audit", "SA"]]) {
        const rows = await demoRows(key);
        expect(rows.length).toBeGreaterThan(0);
        for (const r of rows) {
          expect(r.record_id).toMatch(new RegExp(`^${prefix}-\\d+$`));
          expect(["InProgress", "Completed", "Cancelled"]).toContain(r.status);
          expect(["t", "f"]).toContain(r.is_archived);
          expect(r.site_path.split(".").at(-1)).toBe(r.site_id);
        }
      }
      const cancelled = (await demoRows("temperature_check")).find((r) => r.status === "Cancelled")!;
      expect(cancelled.is_archived).toBe("t");
    });

    it("a field's columns appear together in form order; a grid lists id, last_modified, row_index, ancestor row indexes, then its fields", () => {
      const own = (key: string) => demoDataset(key).columns.map((c) => c.key).filter((k) => k !== "_cursor");
      expect(own("supplier_audit").slice(ENVELOPE_COLUMNS.length).filter((k) => !k.startsWith("verification_"))).toEqual([
        "supplier", "supplier_id", "lot", "lot_id", "result", "scope__haccp", "scope__allergens", "scope__traceability",
        "hygiene__floors", "hygiene__pests", "auditor_signature_name", "auditor_signature_date", "attachments", "photos",
      ]);
      expect(own("supplier_audit__findings")).toEqual(["id", "last_modified", "row_index", "area", "severity", "due"]);
      expect(own("supplier_audit__findings__actions")).toEqual(["id", "last_modified", "row_index", "findings_row_index", "what", "done", "owner", "owner_id"]);
    });

    it("values in CSV form: numbers, instants, empty strings against nulls, quoting, a reference field of hundreds of thousands of characters", async () => {
      const id = idFactory();
      const huge = "x".repeat(300_000);
      const org = await formOrganization(e2e, {
        sites: [site(id("site"))],
        suppliers: [{ id: id("supplier"), name: "Big Supplier" }],
        forms: [{
          id: id("form"), name: "Value Probe", recordPrefix: "VP",
          fields: [
            field.text(id("f:t"), "t"), field.text(id("f:blank"), "blank"), field.text(id("f:none"), "none"),
            field.number(id("f:n1"), "n1"), field.number(id("f:n2"), "n2"), field.number(id("f:n3"), "n3"),
            { id: id("f:dt"), key: "dt", label: "dt", type: "dateTime" },
            { id: id("f:sup"), key: "sup", label: "Supplier", type: "resourceSelect", resourceKind: "suppliers" },
          ],
        }],
        submissions: [{
          id: id("sub"), formId: id("form"), siteId: id("site"), status: "Completed",
          values: {
            t: 'say "hi", then\nleave', blank: "", n1: 2.5, n2: 100, n3: -0.125, dt: "2024-05-03T14:00:00.120+02:00",
            sup: { id: id("supplier"), record: { id: id("supplier"), name: "Big Supplier", notes: huge } },
          },
        }],
      });
      const page = await waitFor("the value probe row", async () => {
        const p = await org.page("value_probe");
        return p.rows.length === 1 ? p : undefined;
      });
      const row = page.rows[0];
      expect(row.t).toBe('say "hi", then\nleave');
      expect(page.raw).toContain('"say ""hi"", then\nleave"');
      expect([row.n1, row.n2, row.n3]).toEqual(["2.5", "100", "-0.125"]);
      expect(row.dt).toBe("2024-05-03 12:00:00.12+00");
      // An empty string is a quoted empty field; no answer is an empty, unquoted field.
      const header = page.header;
      const blankAt = header.indexOf("blank");
      expect(header[blankAt + 1]).toBe("none");
      expect(page.raw).toMatch(/,"",,/);
      expect([row.blank, row.none]).toEqual(["", ""]);
      expect(row.sup_id).toBe(id("supplier"));
      expect(JSON.parse(row.sup).notes).toHaveLength(300_000);
    });

    it("every dataset and column key is at most 63 characters of [a-z0-9_]", () => {
      for (const d of demo) {
        expect(d.key).toMatch(/^[a-z0-9_]{1,63}$/);
        for (const c of d.columns) expect(c.key).toMatch(/^[a-z0-9_]{1,63}$/);
      }
    });
  });

  describe("naming", () => {
    const id = idFactory();
    const longFieldBase = "Sampling location reference code for the environmental monitoring plan"; // over 63 normalized
    const checkboxKey = "Allergen controls verified during changeover of the production line";
    const verifiedKey = "Core temperature measured with calibrated probe at the end";
    const gridLabel = "Production line inspection results for each shift";
    const longFormName = "Quarterly Environmental Monitoring Programme Swab Results For All Production Areas";
    let org: FormOrganization;
    let goods: ListedDataset;

    const goodsFields = (order: "as-first-published" | "swapped"): ApplyFields => {
      const batch = [
        { ...field.text(id("f:batch1"), "Batch No", "Batch number") },
        { ...field.text(id("f:batch2"), "batch-no", "Batch number (again)") },
      ];
      return [
        ...(order === "swapped" ? [...batch].reverse() : batch),
        field.text(id("f:longA"), `${longFieldBase} A`, "Long A"),
        field.text(id("f:longB"), `${longFieldBase} B`, "Long B"),
        { id: id("f:checkbox"), key: checkboxKey, label: "Allergen controls", type: "checkboxGroup", options: [{ key: "Gluten free area", label: "Gluten-free area" }] },
        { id: id("f:verified"), key: verifiedKey, label: "Core temperature", type: "number", requiresVerification: true },
        field.grid(id("f:grid"), "lines", gridLabel, [field.text(id("f:rowindex"), "Row Index", "Row index as written"), field.text(id("f:note"), "note", "Note")]),
        // Added by the second publish, so that its rebuild is observable in the listing.
        ...(order === "swapped" ? [field.text(id("f:supplier"), "supplier", "Supplier")] : []),
      ];
    };

    beforeAll(async () => {
      org = await formOrganization(e2e, {
        sites: [site(id("site"))],
        forms: [
          { id: id("form:goods"), name: "Goods-In  Check (v2)!", recordPrefix: "GI", fields: goodsFields("as-first-published") },
          { id: id("form:long"), name: longFormName, recordPrefix: "QE", fields: [field.text(id("f:swab"), "swab", "Swab")] },
        ],
        submissions: [{
          id: id("sub:1"), formId: id("form:goods"), siteId: id("site"), status: "Completed",
          values: { "Batch No": "B-1", "batch-no": "B-1b", lines: [{ "Row Index": "7", note: "first" }] },
        }],
      });
      goods = await org.waitForDataset("goods_in_check_v2");
    });

    it("names are lowercased, spaces and dashes become underscores, other characters go, runs of underscores collapse", () => {
      expect(normalize("Goods-In  Check (v2)!")).toBe("goods_in_check_v2");
      expect(goods.displayName).toBe("Goods-In  Check (v2)!");
      expect(columnByLabel(goods, "Batch number").key).toBe("batch_no");
    });

    it("characters outside a-z, 0-9, space, dash and underscore are removed, letters with accents included", async () => {
      await org.apply({ forms: [{ id: id("form:umlaut"), name: "Prüfung Öl-Tank", recordPrefix: "PT", fields: [field.text(id("f:umlaut"), "Größe (mm)", "Size")] }] });
      const d = await org.waitForDataset("prfung_l_tank");
      expect(d.displayName).toBe("Prüfung Öl-Tank");
      expect(columnByLabel(d, "Size").key).toBe("gre_mm");
    });

    it("a name taken directly from one form name or field key is truncated to 63 characters, no hash", async () => {
      const longForm = await org.waitForDataset(normalize(longFormName).slice(0, 63));
      expect(longForm.key).toHaveLength(63);
      expect(longForm.displayName).toBe(longFormName);
      expect(columnByLabel(goods, "Long A").key).toBe(normalize(`${longFieldBase} A`).slice(0, 63));
    });

    it("long names truncating to the same 63 characters are separated with numeric suffixes", () => {
      const a = columnByLabel(goods, "Long A").key;
      const b = columnByLabel(goods, "Long B").key;
      expect(b).not.toBe(a);
      expect(b).toMatch(/_2$/);
      expect(b.length).toBeLessThanOrEqual(63);
    });

    it("two equal column names: the field processed first keeps the plain name, the next gets _2, stable across rebuilds", async () => {
      expect(columnByLabel(goods, "Batch number").key).toBe("batch_no");
      expect(columnByLabel(goods, "Batch number (again)").key).toBe("batch_no_2");
      const rows = (await org.page("goods_in_check_v2")).rows;
      expect([rows[0].batch_no, rows[0].batch_no_2]).toEqual(["B-1", "B-1b"]);
      // Republish with the two fields in the other order: each keeps its name.
      const before = goods.changeToken;
      await org.apply({ forms: [{ id: id("form:goods"), name: "Goods-In  Check (v2)!", recordPrefix: "GI", fields: goodsFields("swapped") }] });
      const rebuilt = await org.waitForDataset("goods_in_check_v2", (d) => d.changeToken !== before && d.columns.some((c) => c.key === "supplier"));
      expect(columnByLabel(rebuilt, "Batch number").key).toBe("batch_no");
      expect(columnByLabel(rebuilt, "Batch number (again)").key).toBe("batch_no_2");
      const after = (await org.page("goods_in_check_v2")).rows;
      expect([after[0].batch_no, after[0].batch_no_2]).toEqual(["B-1", "B-1b"]);
    });

    it("a composed name over 63 characters gets an 8-character hash appended, eating into the visible part", () => {
      const full = {
        option: `${normalize(checkboxKey)}__gluten_free_area`,
        verification: `verification_${normalize(verifiedKey)}`,
      };
      const option = columnByLabel(goods, "Allergen controls - Gluten-free area").key;
      const verification = columnByLabel(goods, "Verification: Core temperature").key;
      for (const [key, fullName] of [[option, full.option], [verification, full.verification]]) {
        expect(fullName.length).toBeGreaterThan(63);
        expect(key).toHaveLength(63);
        expect(key).toMatch(HASHED);
        expect(fullName.startsWith(key.slice(0, 63 - 9))).toBe(true);
      }
      // A composed name that fits is not hashed.
      expect(columnByLabel(goods, "Core temperature").key).toBe(normalize(verifiedKey));
    });

    it("a grid dataset is named '<parent>__<grid>', hashed when it overflows, and lists its parent", async () => {
      const fullName = `goods_in_check_v2__${normalize(gridLabel)}`;
      expect(fullName.length).toBeGreaterThan(63);
      const grid = (await org.listing()).find((d) => d.parentDataset === "goods_in_check_v2")!;
      expect(grid.key).toHaveLength(63);
      expect(grid.key).toMatch(HASHED);
      expect(fullName.startsWith(grid.key.slice(0, 54))).toBe(true);
      expect(grid.displayName).toBe(`Goods-In  Check (v2)! - ${gridLabel}`);
      expect(goods.childDatasets).toEqual([grid.key]);
    });

    it("row_index is reserved: a field keyed 'Row Index' becomes row_index_2", async () => {
      const grid = (await org.listing()).find((d) => d.parentDataset === "goods_in_check_v2")!;
      expect(columnByLabel(grid, "Row index as written").key).toBe("row_index_2");
      const rows = (await org.page(grid.key)).rows;
      expect(rows.map((r) => [r.row_index, r.row_index_2])).toEqual([["1", "7"]]);
    });

    it("two equal dataset names: the first generated keeps the plain name, the other gets an 8-character hash", async () => {
      await org.apply({ forms: [{ id: id("form:daily1"), name: "Daily Check", recordPrefix: "DC", fields: [field.text(id("f:d1"), "note")] }] });
      const first = await org.waitForDataset("daily_check");
      await org.apply({ forms: [{ id: id("form:daily2"), name: "Daily-Check", recordPrefix: "DD", fields: [field.text(id("f:d2"), "note")] }] });
      const second = await waitFor("the second Daily Check dataset", async () => (await org.listing()).find((d) => d.displayName === "Daily-Check"));
      expect(second.key).toMatch(/^daily_check_[0-9a-z]{8}$/);
      expect((await org.dataset("daily_check"))?.displayName).toBe(first.displayName);
    });

    it("a column key follows the field key: relabelling keeps the key and changes the label", async () => {
      const fields = [field.text(id("f:r1"), "inspector", "Inspector")];
      await org.apply({ forms: [{ id: id("form:relabel"), name: "Relabel Probe", recordPrefix: "RP", fields }] });
      const before = await org.waitForDataset("relabel_probe");
      expect(columnOf(before, "inspector").label).toBe("Inspector");
      await org.apply({ forms: [{ id: id("form:relabel"), name: "Relabel Probe", recordPrefix: "RP", fields: [field.text(id("f:r1"), "inspector", "Checked by")] }] });
      const after = await org.waitForDataset("relabel_probe", (d) => d.columns.some((c) => c.label === "Checked by"));
      expect(columnOf(after, "inspector").label).toBe("Checked by");
      expect(after.columns.map((c) => c.key)).toEqual(before.columns.map((c) => c.key));
    });

    it("retyping a field can change which columns it exports", async () => {
      await org.apply({ forms: [{ id: id("form:retype"), name: "Retype Probe", recordPrefix: "RT", fields: [field.text(id("f:sig"), "approval", "Approval")] }] });
      const before = await org.waitForDataset("retype_probe");
      expect(columnOf(before, "approval").dataType).toBe("text");
      await org.apply({ forms: [{ id: id("form:retype"), name: "Retype Probe", recordPrefix: "RT", fields: [{ id: id("f:sig"), key: "approval", label: "Approval", type: "signature" }] }] });
      const after = await org.waitForDataset("retype_probe", (d) => d.columns.some((c) => c.key.startsWith("approval_")));
      expect(columnOf(after, "approval_name")).toMatchObject({ dataType: "text", label: "Approval - Name" });
      expect(columnOf(after, "approval_date")).toMatchObject({ dataType: "dateTime", label: "Approval - Date" });
    });

    it("a form named like a fixed dataset gets the hash; the fixed dataset keeps its key", async () => {
      await org.apply({ forms: [{ id: id("form:deviations"), name: "Deviations", recordPrefix: "DV", fields: [field.text(id("f:dv"), "note")] }] });
      const formDataset = await waitFor("the form named Deviations", async () =>
        (await org.listing()).find((d) => d.displayName === "Deviations" && d.columns.some((c) => c.key === "started_at")));
      expect(formDataset.key).toMatch(/^deviations_[0-9a-z]{8}$/);
      const fixed = (await org.dataset("deviations"))!;
      expect(fixed.columns.map((c) => c.key)).toContain("severity");
      expect((await org.page("deviations")).header).toContain("severity");
    });

    it("field keys equal to envelope, grid or _cursor column names get numeric suffixes; _cursor stays single and last", async () => {
      const fields: ApplyFields = [
        field.text(id("f:status"), "Status", "Inspection status"),
        field.text(id("f:lm"), "Last Modified", "Last modified (as written)"),
        field.text(id("f:cursor"), "_cursor", "Cursor text"),
        field.grid(id("f:g"), "rows", "Rows", [field.text(id("f:gid"), "ID", "Row id"), field.text(id("f:glm"), "last modified", "Row modified")]),
      ];
      await org.apply({
        forms: [{ id: id("form:clash"), name: "Clash Probe", recordPrefix: "CP", fields }],
        submissions: [{ id: id("sub:clash"), formId: id("form:clash"), siteId: id("site"), status: "Completed", values: { Status: "ok", _cursor: "c", rows: [{ ID: "r1" }] } }],
      });
      const d = await org.waitForDataset("clash_probe");
      expect(columnByLabel(d, "Inspection status").key).toBe("status_2");
      expect(columnByLabel(d, "Last modified (as written)").key).toBe("last_modified_2");
      expect(columnByLabel(d, "Cursor text").key).not.toBe("_cursor");
      const grid = await org.waitForDataset("clash_probe__rows");
      expect(columnByLabel(grid, "Row id").key).toBe("id_2");
      expect(columnByLabel(grid, "Row modified").key).toBe("last_modified_2");
      for (const ds of [d, grid]) {
        const keys = ds.columns.map((c) => c.key);
        expect(new Set(keys).size).toBe(keys.length);
        expect(keys.filter((k) => k === "_cursor")).toHaveLength(1);
        expect(keys.at(-1)).toBe("_cursor");
      }
      const rows = await waitFor("the clash probe row", async () => (await org.page("clash_probe")).rows[0]);
      expect([rows.status, rows.status_2]).toEqual(["Completed", "ok"]);
      expect(rows._cursor).toMatch(/^[A-Za-z0-9+/=]{20,}$/);
    });

    it("only published forms have datasets: an unpublished draft has none until it is published", async () => {
      const draft = { id: id("form:draft"), name: "Draft Probe", recordPrefix: "DP", fields: [field.text(id("f:draft"), "note")] };
      await org.apply({ forms: [{ ...draft, publish: false }, { id: id("form:marker"), name: "Marker Probe", recordPrefix: "MP", fields: [field.text(id("f:m"), "note")] }] });
      await org.waitForDataset("marker_probe");
      expect(await org.dataset("draft_probe")).toBeUndefined();
      await org.apply({ forms: [draft] });
      expect((await org.waitForDataset("draft_probe")).displayName).toBe("Draft Probe");
    });

    it("every key of the organization's listing is at most 63 characters of [a-z0-9_]", async () => {
      for (const d of await org.listing()) {
        expect(d.key).toMatch(/^[a-z0-9_]{1,63}$/);
        for (const c of d.columns) expect(c.key).toMatch(/^[a-z0-9_]{1,63}$/);
      }
    });
  });

  describe("lifecycle", () => {
    /** A small form with a grid, in an organization of its own. */
    async function hygieneOrganization(opts: { timeZone?: string } = {}) {
      const id = idFactory();
      const form = (name = "Hygiene Round", extra: ApplyFields = [], omit: string[] = []) => ({
        id: id("form"), name, recordPrefix: "HR",
        fields: [
          field.text(id("f:area"), "area", "Area"),
          field.number(id("f:score"), "score", "Score"),
          field.grid(id("f:items"), "items", "Items", [field.text(id("f:item"), "item", "Item")]),
          ...extra,
        ].filter((f) => !omit.includes(f.key)),
      });
      const submission = (n: number, values: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
        id: id(`sub:${n}`), formId: id("form"), siteId: id("site"), status: "Completed" as const,
        completedAt: `2024-04-0${n}T10:00:00Z`, values, ...extra,
      });
      const org = await formOrganization(e2e, { sites: [site(id("site"), "Main Site", opts.timeZone ?? "Europe/Berlin")], forms: [form()] });
      // Submissions after the first build, so that no change from the initial load is still pending
      // when a test takes its "before" picture (a build and the consumer's passes are separate commits).
      await org.waitForDataset("hygiene_round");
      await org.apply({
        submissions: [
          submission(1, { area: "Bakery", score: 7, items: [{ item: "floor" }, { item: "walls" }] }),
          submission(2, { area: "Packing", score: 9, items: [{ item: "belt" }] }),
        ],
      });
      await waitFor("both submissions exported", async () => (await org.page("hygiene_round")).rows.length === 2);
      return { id, org, form, submission };
    }

    it("a new submission appears after apply and moves its dataset's changeToken and the listing ETag, no other token", async () => {
      const { org, submission, id } = await hygieneOrganization();
      const before = await org.get("/v1/datasets");
      const etag = before.headers.get("etag")!;
      const tokensBefore = tokens((await before.json()) as ListedDataset[]);
      await org.apply({ submissions: [submission(3, { area: "Dock", score: 5, items: [] })] });
      const moved = await waitFor("the changeToken of hygiene_round to move", async () => {
        const d = await org.dataset("hygiene_round");
        return d && d.changeToken !== tokensBefore.get("hygiene_round") ? d : undefined;
      });
      expect(moved.key).toBe("hygiene_round");
      const rows = (await org.page("hygiene_round")).rows;
      expect(rows.map((r) => r.id)).toContain(id("sub:3"));
      const after = await org.get("/v1/datasets", { "If-None-Match": etag });
      expect(after.status).toBe(200);
      expect(after.headers.get("etag")).not.toBe(etag);
      for (const [key, token] of tokens((await after.json()) as ListedDataset[])) {
        if (key !== "hygiene_round") expect({ key, token }).toEqual({ key, token: tokensBefore.get(key) });
      }
    });

    it("an edit moves the submission's last_modified and it comes back after a held cursor (grid rows too)", async () => {
      const { org, submission, id } = await hygieneOrganization();
      const first = (await org.page("hygiene_round")).rows;
      const firstGrid = (await org.page("hygiene_round__items")).rows;
      const held = first[first.length - 1]._cursor;
      const heldGrid = firstGrid[firstGrid.length - 1]._cursor;
      const old = first.find((r) => r.id === id("sub:1"))!;
      await org.apply({ submissions: [submission(1, { area: "Bakery", score: 3, items: [{ item: "floor" }, { item: "walls" }] })] });
      const edited = await waitFor("the edited submission after the held cursor", async () =>
        (await org.page("hygiene_round", { cursor: held })).rows.find((r) => r.id === id("sub:1")));
      expect(edited.score).toBe("3");
      expect(edited.last_modified > old.last_modified).toBe(true);
      const grid = (await org.page("hygiene_round__items", { cursor: heldGrid })).rows;
      expect(grid.map((r) => [r.id, r.row_index, r.item])).toEqual([[id("sub:1"), "1", "floor"], [id("sub:1"), "2", "walls"]]);
      expect(grid.every((r) => r.last_modified === edited.last_modified)).toBe(true);
    });

    it("a deleted submission vanishes silently from its form datasets, and its deviations from deviations", async () => {
      const { org, submission, id } = await hygieneOrganization();
      await org.apply({
        submissions: [submission(1, { area: "Bakery", score: 7, items: [{ item: "floor" }, { item: "walls" }] }, { steps: [{ id: id("step"), name: "Record" }] })],
      });
      // Submission 2 modified after submission 1, so that rows follow a cursor held on submission 1.
      await org.apply({ submissions: [submission(2, { area: "Packing", score: 8, items: [{ item: "belt" }] })] });
      await waitFor("submission 2 modified last", async () => (await org.page("hygiene_round__items")).rows.at(-1)?.id === id("sub:2"));
      await org.apply({
        deviations: [{ id: id("deviation"), submissionId: id("sub:1"), stepId: id("step"), severity: "High", fieldKey: "score", displayValue: "7" }],
      });
      expect((await org.page("deviations")).rows.map((r) => r.id)).toEqual([id("deviation")]);
      const gridBefore = (await org.page("hygiene_round__items")).rows;
      const held = gridBefore.findIndex((r) => r.id === id("sub:1"));
      const expectedAfterHeld = gridBefore.slice(held + 1).filter((r) => r.id !== id("sub:1")).map(rowPosition);
      expect(expectedAfterHeld).toEqual([[id("sub:2"), "1", "belt"]]);
      await org.apply({ delete: { submissions: [id("sub:1")] } });
      await waitFor("the deleted submission to vanish", async () => !(await org.page("hygiene_round")).rows.some((r) => r.id === id("sub:1")));
      expect((await org.page("hygiene_round")).rows.map((r) => r.id)).toEqual([id("sub:2")]);
      expect((await org.page("hygiene_round__items")).rows.map((r) => [r.id, r.row_index])).toEqual([[id("sub:2"), "1"]]);
      expect((await org.page("deviations")).rows).toEqual([]);
      // A cursor taken on a row that no longer exists still resumes after its position.
      expect((await org.page("hygiene_round__items", { cursor: gridBefore[held]._cursor })).rows.map(rowPosition)).toEqual(expectedAfterHeld);
    });

    it("a form rename moves its datasets to new keys: old key 404 DATASET_NOT_FOUND, an old cursor on the new key 400 INVALID_CURSOR", async () => {
      const { org, form, id } = await hygieneOrganization();
      const oldCursor = (await org.page("hygiene_round")).rows[0]._cursor;
      const oldGridCursor = (await org.page("hygiene_round__items")).rows[0]._cursor;
      const etag = (await org.get("/v1/datasets")).headers.get("etag")!;
      await org.apply({ forms: [form("Hygiene Walk")] });
      const renamed = await org.waitForDataset("hygiene_walk");
      expect((await org.get("/v1/datasets", { "If-None-Match": etag })).status).toBe(200);
      expect(renamed.displayName).toBe("Hygiene Walk");
      expect(renamed.childDatasets).toEqual(["hygiene_walk__items"]);
      const keys = (await org.listing()).map((d) => d.key);
      expect(keys).toContain("hygiene_walk__items");
      expect(keys).not.toContain("hygiene_round");
      expect(keys).not.toContain("hygiene_round__items");
      for (const old of ["hygiene_round", "hygiene_round__items"]) {
        expect((await problem(await org.get(csvPath(old)), 404)).errorCode).toBe("DATASET_NOT_FOUND");
      }
      expect((await problem(await org.get(csvPath("hygiene_walk", { cursor: oldCursor })), 400)).errorCode).toBe("INVALID_CURSOR");
      expect((await problem(await org.get(csvPath("hygiene_walk__items", { cursor: oldGridCursor })), 400)).errorCode).toBe("INVALID_CURSOR");
      expect((await org.page("hygiene_walk")).rows).toHaveLength(2);
      // The retired key is never handed out again: a new form with the old name gets the hash, the old key stays 404.
      await org.apply({ forms: [{ id: id("form:again"), name: "Hygiene Round", recordPrefix: "HA", fields: [field.text(id("f:again"), "note")] }] });
      const again = await waitFor("the new Hygiene Round", async () => (await org.listing()).find((d) => d.displayName === "Hygiene Round"));
      expect(again.key).toMatch(/^hygiene_round_[0-9a-z]{8}$/);
      expect((await problem(await org.get(csvPath("hygiene_round", { cursor: oldCursor })), 404)).errorCode).toBe("DATASET_NOT_FOUND");
    });

    it("a grid relabel moves the grid dataset to a new key; the submission dataset keeps its key", async () => {
      const { org, id, form } = await hygieneOrganization();
      const relabelled = form();
      relabelled.fields = relabelled.fields.map((f) => (f.id === id("f:items") ? { ...f, label: "Line Items" } : f));
      await org.apply({ forms: [relabelled] });
      const grid = await org.waitForDataset("hygiene_round__line_items");
      expect(grid).toMatchObject({ parentDataset: "hygiene_round", displayName: "Hygiene Round - Line Items" });
      expect((await org.dataset("hygiene_round"))?.childDatasets).toEqual(["hygiene_round__line_items"]);
      expect((await problem(await org.get(csvPath("hygiene_round__items")), 404)).errorCode).toBe("DATASET_NOT_FOUND");
      expect((await org.page("hygiene_round__line_items")).rows.map((r) => r.item)).toEqual(expect.arrayContaining(["floor", "walls", "belt"]));
    });

    it("a grid removed by a republish keeps its dataset (removing a field never removes its columns)", async () => {
      const { org, form } = await hygieneOrganization();
      const before = (await org.dataset("hygiene_round"))!;
      const gridRows = (await org.page("hygiene_round__items")).rows;
      await org.apply({ forms: [form("Hygiene Round", [], ["items"])] });
      await org.waitForDataset("hygiene_round", (d) => d.changeToken !== before.changeToken);
      const grid = await org.dataset("hygiene_round__items");
      expect(grid?.parentDataset).toBe("hygiene_round");
      expect((await org.page("hygiene_round__items")).rows.map(rowPosition)).toEqual(gridRows.map(rowPosition));
    });

    it("a republish with a new field adds a column and moves the token; the header may differ between pages", async () => {
      const { org, form, id } = await hygieneOrganization();
      const before = (await org.dataset("hygiene_round"))!;
      const page1 = await org.page("hygiene_round", { limit: 1 });
      expect(page1.header).not.toContain("remarks");
      await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:remarks"), "remarks", "Remarks")])] });
      const after = await org.waitForDataset("hygiene_round", (d) => d.columns.some((c) => c.key === "remarks"));
      expect(after.changeToken).not.toBe(before.changeToken);
      expect(columnOf(after, "remarks")).toMatchObject({ dataType: "text", label: "Remarks" });
      const last = page1.rows[0];
      const page2 = await org.page("hygiene_round", { modifiedSince: last.last_modified, after: last.id, limit: 1 });
      expect(page2.header).toContain("remarks");
      expect(page2.header).not.toEqual(page1.header);
      expect(page2.rows).toHaveLength(1);
      expect(page2.rows[0].id).not.toBe(last.id);
      // The cursor is bound to the row shape (what a paging position means), not to the columns: it pages on.
      const resumed = await org.page("hygiene_round", { cursor: last._cursor, limit: 1 });
      expect(resumed.header).toContain("remarks");
      expect(resumed.rows.map((r) => r.id)).toEqual(page2.rows.map((r) => r.id));
    });

    it("a held cursor survives publishes that add, remove and retype fields mid-backfill (grid too): every row arrives once", async () => {
      const { org, form, id, submission } = await hygieneOrganization();
      await org.apply({
        submissions: [
          submission(3, { area: "Dock", score: 4, items: [{ item: "door" }, { item: "ramp" }] }),
          submission(4, { area: "Store", score: 6, items: [{ item: "shelf" }] }),
        ],
      });
      const full = await waitFor("four submissions", async () => {
        const all = await org.pageAll("hygiene_round");
        return all.rows.length === 4 ? all.rows : undefined;
      });
      const fullGrid = (await org.pageAll("hygiene_round__items")).rows;
      expect(fullGrid).toHaveLength(6);
      const seen: Row[] = [];
      const seenGrid: Row[] = [];
      const step = async () => {
        const cursor = seen.length ? seen[seen.length - 1]._cursor : undefined;
        const gridCursor = seenGrid.length ? seenGrid[seenGrid.length - 1]._cursor : undefined;
        const page = await org.page("hygiene_round", { limit: 1, cursor });
        const gridPage = await org.page("hygiene_round__items", { limit: 1, cursor: gridCursor });
        seen.push(...page.rows);
        seenGrid.push(...gridPage.rows);
        return { page, gridPage };
      };
      await step();
      // Publish 1 adds a field (a new column): the held cursors page on and the header carries it.
      await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:remarks"), "remarks", "Remarks")])] });
      await org.waitForDataset("hygiene_round", (d) => d.columns.some((c) => c.key === "remarks"));
      const afterAdd = await step();
      expect(afterAdd.page.header).toContain("remarks");
      expect(afterAdd.page.rows).toHaveLength(1);
      // Publish 2 removes that field again and retypes another (score: number -> text).
      const retyped = form("Hygiene Round");
      retyped.fields = retyped.fields.map((f) => (f.key === "score" ? field.text(id("f:score"), "score", "Score") : f));
      await org.apply({ forms: [retyped] });
      await org.waitForDataset("hygiene_round", (d) => columnOf(d, "score")?.dataType === "text");
      for (let i = 0; i < 20; i++) {
        const { page, gridPage } = await step();
        if (page.rows.length < 1 && gridPage.rows.length < 1) break;
      }
      expect(seen.map((r) => r.id)).toEqual(full.map((r) => r.id));
      expect(new Set(seen.map((r) => r.id)).size).toBe(4);
      expect(seenGrid.map(rowPosition)).toEqual(fullGrid.map(rowPosition));
    });

    it("a republish that only relabels moves the token but keeps held cursors valid (same row shape)", async () => {
      const { org, form, id } = await hygieneOrganization();
      const before = (await org.dataset("hygiene_round"))!;
      const first = (await org.page("hygiene_round", { limit: 1 })).rows[0];
      const relabelled = form();
      relabelled.fields = relabelled.fields.map((f) => (f.id === id("f:area") ? { ...f, label: "Room" } : f));
      await org.apply({ forms: [relabelled] });
      const after = await org.waitForDataset("hygiene_round", (d) => d.columns.some((c) => c.label === "Room"));
      expect(after.changeToken).not.toBe(before.changeToken);
      const resumed = await org.page("hygiene_round", { cursor: first._cursor });
      expect(resumed.rows).toHaveLength(1);
      expect(resumed.rows[0].id).not.toBe(first.id);
    });

    it("a field removed by a republish keeps its column and the values it held", async () => {
      const { org, form } = await hygieneOrganization();
      const before = (await org.dataset("hygiene_round"))!;
      await org.apply({ forms: [form("Hygiene Round", [], ["score"])] });
      const after = await org.waitForDataset("hygiene_round", (d) => d.changeToken !== before.changeToken);
      expect(columnOf(after, "score")).toMatchObject({ dataType: "number", label: "Score" });
      const rows = (await org.page("hygiene_round")).rows;
      expect(rows.map((r) => r.score).sort()).toEqual(["7", "9"]);
    });

    it("a deleted form keeps its datasets in the listing, unmarked, exporting what they held and never changing again", async () => {
      const { org, form, id, submission } = await hygieneOrganization();
      const listed = (await org.listing()).filter((d) => d.key.startsWith("hygiene_round"));
      const rows = (await org.page("hygiene_round")).rows;
      const gridRows = (await org.page("hygiene_round__items")).rows;
      await org.apply({ forms: [{ ...form(), deleted: true }] });
      // An edit of one of its submissions afterwards does not reach the frozen datasets.
      await org.apply({ submissions: [submission(2, { area: "Packing", score: 1, items: [] })] });
      // A later change that the schema service must process proves the deletion was processed too.
      await org.apply({ forms: [{ id: id("form:sentinel"), name: "Sentinel", recordPrefix: "SN", fields: [field.text(id("f:s"), "s")] }] });
      await org.waitForDataset("sentinel");
      const now = (await org.listing()).filter((d) => d.key.startsWith("hygiene_round"));
      expect(now).toEqual(listed);
      expect((await org.page("hygiene_round")).rows).toEqual(rows);
      expect((await org.page("hygiene_round__items")).rows).toEqual(gridRows);
    });

    it("a form hard-deleted from the source keeps its datasets and their rows as well", async () => {
      const { org, id } = await hygieneOrganization();
      const listed = (await org.listing()).filter((d) => d.key.startsWith("hygiene_round"));
      const rows = (await org.page("hygiene_round")).rows;
      await org.apply({ delete: { forms: [id("form")] } });
      await org.apply({ forms: [{ id: id("form:sentinel"), name: "Sentinel", recordPrefix: "SN", fields: [field.text(id("f:s"), "s")] }] });
      await org.waitForDataset("sentinel");
      expect((await org.listing()).filter((d) => d.key.startsWith("hygiene_round"))).toEqual(listed);
      expect((await org.page("hygiene_round")).rows).toEqual(rows);
    });

    it("a site with a blank time zone: the form's datasets answer 503 DATASET_NOT_EXPORTABLE (no Retry-After), other datasets keep serving", async () => {
      const { org, form, id } = await hygieneOrganization();
      await org.apply({
        sites: [site(id("site:other"), "Other Site", "UTC")],
        forms: [{ id: id("form:pest"), name: "Pest Check", recordPrefix: "PC", fields: [field.text(id("f:trap"), "trap", "Trap")] }],
        submissions: [{ id: id("sub:pest"), formId: id("form:pest"), siteId: id("site:other"), status: "Completed", values: { trap: "T1" } }],
      });
      await waitFor("the Pest Check submission", async () => (await org.page("pest_check")).rows.length === 1);
      try {
        await org.apply({ sites: [site(id("site"), "Main Site", "")] });
        await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:extra"), "extra", "Extra")])] });
        const blocked = await waitFor("hygiene_round to become not exportable", async () => {
          const res = await org.get(csvPath("hygiene_round"));
          if (res.status === 503) return res;
          await res.arrayBuffer();
          return undefined;
        });
        const body = await problem(blocked, 503);
        expect(body).toMatchObject({ errorCode: "DATASET_NOT_EXPORTABLE", title: "Dataset cannot be exported" });
        expect(blocked.headers.get("retry-after")).toBeNull();
        // A dataset known to be out of date wins over a merely wrong parameter; an unparsable one comes first.
        expect((await problem(await org.get(csvPath("hygiene_round", { limit: 9999 })), 503)).errorCode).toBe("DATASET_NOT_EXPORTABLE");
        expect((await problem(await org.get(csvPath("hygiene_round", { limit: "x" })), 400)).errors).toHaveProperty("limit");
        const grid = await org.get(csvPath("hygiene_round__items"));
        expect((await problem(grid, 503)).errorCode).toBe("DATASET_NOT_EXPORTABLE");
        expect(grid.headers.get("retry-after")).toBeNull();
        expect((await org.page("pest_check")).rows).toHaveLength(1);
        expect((await org.get(csvPath("deviations"))).status).toBe(200);
        expect((await org.get(csvPath("resources_suppliers"))).status).toBe(200);
        // Still listed, with its columns.
        expect((await org.dataset("hygiene_round"))?.columns.map((c) => c.key)).toContain("score");
      } finally {
        await org.apply({ sites: [site(id("site"), "Main Site", "Europe/Berlin")] });
      }
      // Fixing the zone rebuilds the form.
      const recovered = await org.waitForDataset("hygiene_round", (d) => d.columns.some((c) => c.key === "extra"));
      expect(recovered.key).toBe("hygiene_round");
      await waitFor("hygiene_round to export again", async () => (await org.get(csvPath("hygiene_round"))).status === 200);
      expect((await org.page("hygiene_round")).rows).toHaveLength(2);
    });

    it("a new submission at a site whose time zone became blank: 503 DATASET_NOT_EXPORTABLE until the zone is fixed, then nothing is missing", async () => {
      const { org, submission, id } = await hygieneOrganization();
      try {
        await org.apply({ sites: [site(id("site"), "Main Site", "")] });
        await org.apply({ submissions: [submission(3, { area: "Dock", score: 4, items: [{ item: "ramp" }] })] });
        const blocked = await waitFor("hygiene_round to become not exportable", async () => {
          const res = await org.get(csvPath("hygiene_round"));
          if (res.status === 503) return res;
          await res.arrayBuffer();
          return undefined;
        });
        expect((await problem(blocked, 503)).errorCode).toBe("DATASET_NOT_EXPORTABLE");
      } finally {
        await org.apply({ sites: [site(id("site"), "Main Site", "Europe/Berlin")] });
      }
      const rows = await waitFor("all three submissions after the fix", async () => {
        const res = await org.get(csvPath("hygiene_round"));
        if (res.status !== 200) return undefined;
        const page = parseCsvPage(Buffer.from(await res.arrayBuffer()));
        return page.rows.length === 3 ? page.rows : undefined;
      });
      expect(rows.find((r) => r.id === id("sub:3"))?.last_modified_local).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}/);
      expect((await org.page("hygiene_round__items")).rows.map((r) => r.item).sort()).toEqual(["belt", "floor", "ramp", "walls"]);
    });
  });

  describe("tenant isolation", () => {
    it("another organization's form dataset key answers 404 DATASET_NOT_FOUND for the demo key", async () => {
      const id = idFactory();
      const other = await formOrganization(e2e, {
        sites: [site(id("site"))],
        forms: [{ id: id("form"), name: "Isolation Probe", recordPrefix: "IP", fields: [field.grid(id("f:g"), "rows", "Rows", [field.text(id("f:t"), "t")])] }],
        submissions: [{ id: id("sub"), formId: id("form"), siteId: id("site"), values: { rows: [{ t: "secret" }] } }],
      });
      await waitFor("the other organization's submission", async () => (await other.page("isolation_probe")).rows.length === 1);
      for (const key of ["isolation_probe", "isolation_probe__rows"]) {
        expect((await problem(await e2e.get(csvPath(key)), 404)).errorCode).toBe("DATASET_NOT_FOUND");
      }
      const demoKeys = ((await (await e2e.get("/v1/datasets")).json()) as ListedDataset[]).map((d) => d.key);
      expect(demoKeys).not.toContain("isolation_probe");
      // And the other way round.
      expect((await problem(await other.get(csvPath("supplier_audit")), 404)).errorCode).toBe("DATASET_NOT_FOUND");
    });
  });
});
