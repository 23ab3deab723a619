import fc from "fast-check";
import { deriveFormDatasets, mergeRetainedFields, type DatasetPlan, type FormField, type PreviousDataset } from "../src";

const FORM_ID = "6f1c2a7e-0000-4000-8000-000000000001";
let n = 0;
const id = () => `00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`;
const f = (type: string, key: string, label: string, extra: Partial<FormField> = {}): FormField => ({ id: id(), key, label, type, ...extra });

const cols = (plan: DatasetPlan) => plan.columns.map((c) => [c.key, c.dataType, c.label]);
const derive = (formName: string, fields: FormField[], previous: PreviousDataset[] = [], takenKeys: string[] = []) =>
  deriveFormDatasets({ formId: FORM_ID, formName, fields, previous, takenKeys });

/** What the registry would hold after a build of these plans (input for the next derivation). */
const asPrevious = (plans: DatasetPlan[], state: PreviousDataset["state"] = "ready"): PreviousDataset[] =>
  plans.map((p) => ({ key: p.key, sourceRef: p.sourceRef, state, nameAssignments: p.nameAssignments, generation: 1 }));

const SUBMISSION_ENVELOPE = [
  ["id", "uuid", "ID"],
  ["record_id", "text", "Record ID"],
  ["site_id", "uuid", "Site ID"],
  ["site_name", "text", "Site Name"],
  ["site_path", "text", "Site Path"],
  ["status", "text", "Status"],
  ["is_archived", "boolean", "Is Archived"],
  ["started_at", "dateTime", "Started At"],
  ["started_at_local", "localDateTime", "Started At (Local)"],
  ["completed_at", "dateTime", "Completed At"],
  ["completed_at_local", "localDateTime", "Completed At (Local)"],
  ["last_modified", "dateTime", "Last Modified"],
  ["last_modified_local", "localDateTime", "Last Modified (Local)"],
];

describe("columns per field type (golden)", () => {
  const fields: FormField[] = [
    f("heading", "intro", "Introduction"),
    f("text", "Operator", "Operator"),
    f("paragraph", "notes", "Notes"),
    f("email", "email", "E-mail"),
    f("phone", "phone", "Phone"),
    f("time", "shift_start", "Shift start"),
    f("number", "Temperature", "Temperature (°C)", { requiresVerification: true }),
    f("yesNo", "passed", "Passed?"),
    f("date", "production_date", "Production date"),
    f("dateTime", "sampled_local", "Sampled at"),
    f("select", "line", "Line", { options: [{ key: "l1", label: "Line 1" }] }),
    f("checkboxGroup", "Allergens", "Allergens", { options: [{ key: "milk", label: "Milk" }, { key: "Tree Nuts", label: "Tree nuts" }] }),
    f("survey", "quality", "Quality", {
      options: [{ key: "good", label: "Good" }],
      questions: [{ key: "taste", label: "Taste" }, { key: "smell", label: "Smell" }],
    }),
    f("signature", "approver", "Approver"),
    f("resourceSelect", "supplier", "Supplier", { resourceKind: "suppliers" }),
    f("attachment", "files", "Files"),
    f("photo", "pictures", "Pictures"),
    f("instructions", "howto", "How to"),
    f("grid", "checks", "Checks", { fields: [f("text", "item", "Item")] }),
  ];

  it("submission dataset: envelope, then each field's columns in form order", () => {
    const [submission] = derive("Daily Check", fields);
    expect(submission.key).toBe("daily_check");
    expect(submission.displayName).toBe("Daily Check");
    expect(submission.kind).toBe("submission");
    expect(cols(submission)).toEqual([
      ...SUBMISSION_ENVELOPE,
      ["operator", "text", "Operator"],
      ["notes", "text", "Notes"],
      ["email", "text", "E-mail"],
      ["phone", "text", "Phone"],
      ["shift_start", "text", "Shift start"],
      ["temperature", "number", "Temperature (°C)"],
      ["verification_temperature", "localDateTime", "Verification: Temperature (°C)"],
      ["passed", "boolean", "Passed?"],
      ["production_date", "date", "Production date"],
      ["sampled_local", "dateTime", "Sampled at"],
      ["line", "text", "Line"],
      ["allergens__milk", "boolean", "Allergens - Milk"],
      ["allergens__tree_nuts", "boolean", "Allergens - Tree nuts"],
      ["quality__taste", "text", "Quality - Taste"],
      ["quality__smell", "text", "Quality - Smell"],
      ["approver_name", "text", "Approver - Name"],
      ["approver_date", "dateTime", "Approver - Date"],
      ["supplier", "text", "Supplier"],
      ["supplier_id", "uuid", "Supplier - ID"],
      ["files", "text", "Files"],
      ["pictures", "text", "Pictures"],
    ]);
    expect(submission.childKeys).toEqual(["daily_check__checks"]);
    expect(submission.parentKey).toBeUndefined();
  });

  it("grid datasets: id, last_modified, row_index, ancestor row indexes outermost first, then fields", () => {
    const inner = f("grid", "Readings", "Readings", { fields: [f("number", "value", "Value"), f("yesNo", "ok", "OK")] });
    const middle = f("grid", "Batches", "Batches", { fields: [f("text", "batch", "Batch"), inner] });
    const outer = f("grid", "Lines", "Production Lines", { fields: [f("text", "line", "Line"), middle] });
    const plans = derive("Audit", [outer]);
    expect(plans.map((p) => [p.key, p.displayName, p.parentKey, p.childKeys])).toEqual([
      ["audit", "Audit", undefined, ["audit__production_lines"]],
      ["audit__production_lines", "Audit - Production Lines", "audit", ["audit__production_lines__batches"]],
      ["audit__production_lines__batches", "Audit - Production Lines - Batches", "audit__production_lines", ["audit__production_lines__batches__readings"]],
      ["audit__production_lines__batches__readings", "Audit - Production Lines - Batches - Readings", "audit__production_lines__batches", []],
    ]);
    expect(cols(plans[3])).toEqual([
      ["id", "uuid", "ID"],
      ["last_modified", "dateTime", "Last Modified"],
      ["row_index", "number", "Row Index"],
      ["lines_row_index", "number", "Production Lines - Row Index"],
      ["batches_row_index", "number", "Batches - Row Index"],
      ["value", "number", "Value"],
      ["ok", "boolean", "OK"],
    ]);
    expect(plans.map((p) => p.kind)).toEqual(["submission", "grid", "grid", "grid"]);
  });

  it("reserved names and clashes: row_index and envelope keys are never taken by a field; first field keeps the plain name", () => {
    const a = f("text", "Row Index", "Row Index");
    const b = f("text", "status", "Status field");
    const c = f("text", "note", "Note 1");
    const d = f("text", "Note", "Note 2");
    const [plan] = derive("Clashes", [a, b, c, d]);
    expect(plan.columns.slice(13).map((x) => x.key)).toEqual(["row_index_2", "status_2", "note", "note_2"]);
  });

  it("63-character limits: direct names truncate, composed names get a hash of the full name", () => {
    const long = "a".repeat(70);
    const [plan] = derive("F", [f("text", long, "Long"), f("signature", long, "Sig"), f("checkboxGroup", "x", "X", { options: [{ key: "o".repeat(70), label: "O" }] })]);
    const keys = plan.columns.slice(13).map((c) => c.key);
    expect(keys[0]).toBe("a".repeat(63));
    expect(keys[1]).toMatch(/^a{54}_[0-9a-f]{8}$/);
    expect(keys[2]).toMatch(/^a{54}_[0-9a-f]{8}$/);
    expect(keys[1]).not.toBe(keys[2]);
    expect(keys[3]).toMatch(/^x__o{51}_[0-9a-f]{8}$/);
    for (const k of keys) expect(k.length).toBeLessThanOrEqual(63);
  });

  it("long form and grid names: dataset keys stay within 63 characters", () => {
    const grid = f("grid", "g", "G".repeat(70), { fields: [f("grid", "h", "Inner", { fields: [] })] });
    const plans = derive("Form ".repeat(20), [grid]);
    for (const p of plans) expect(p.key.length).toBeLessThanOrEqual(63);
    expect(plans[0].key).toBe("form_".repeat(12) + "for");
    expect(plans[1].key).toMatch(/_[0-9a-f]{8}$/);
    expect(new Set(plans.map((p) => p.key)).size).toBe(3);
  });
});

describe("dataset key collisions", () => {
  it("an equal name owned by another dataset gets the form-id hash; a fixed dataset key counts as taken", () => {
    const [plan] = derive("Deviations", []);
    expect(plan.key).toMatch(/^deviations_[0-9a-f]{8}$/);
    const [other] = derive("Audit", [], [], ["audit"]);
    expect(other.key).toMatch(/^audit_[0-9a-f]{8}$/);
  });

  it("keeps its key across rebuilds even when the plain name becomes free, and moves it on rename", () => {
    const first = derive("Audit", [], [], ["audit"]);
    const again = derive("Audit", [], asPrevious(first), [first[0].key]);
    expect(again[0].key).toBe(first[0].key);
    const renamed = derive("Audit v2", [], asPrevious(first), [first[0].key, "audit"]);
    expect(renamed[0].key).toBe("audit_v2");
  });

  it("grid datasets whose names collide within a form are separated by the hash", () => {
    const plans = derive("F", [f("grid", "a", "Rows", { fields: [] }), f("grid", "b", "Rows", { fields: [] })]);
    expect(plans[1].key).toBe("f__rows");
    expect(plans[2].key).toMatch(/^f__rows_[0-9a-f]{8}$/);
  });
});

describe("stability across rebuilds", () => {
  it("a relabelled field keeps its key; a retyped field changes its columns; clash suffixes do not move when the first field is removed", () => {
    const a = f("text", "note", "Note");
    const b = f("text", "Note", "Another note");
    const first = derive("F", [a, b]);
    expect(first[0].columns.slice(13).map((c) => c.key)).toEqual(["note", "note_2"]);
    const second = derive("F", [b, { ...a, label: "Renamed" }], asPrevious(first));
    expect(second[0].columns.slice(13).map((c) => [c.key, c.label])).toEqual([
      ["note_2", "Another note"],
      ["note", "Renamed"],
    ]);
    const retyped = derive("F", [{ ...a, type: "signature" }], asPrevious(first));
    expect(retyped[0].columns.slice(13).map((c) => [c.key, c.dataType])).toEqual([
      ["note_name", "text"],
      ["note_date", "dateTime"],
    ]);
  });

  it("removed fields keep their columns (merged from older versions), fields never exported do not come back", () => {
    const kept = f("number", "weight", "Weight");
    const neverExported = f("text", "draft", "Draft");
    const stays = f("text", "name", "Name");
    const gridChild = f("text", "item", "Item");
    const grid = f("grid", "lines", "Lines", { fields: [gridChild] });
    const first = derive("F", [stays, kept, grid]);
    const merged = mergeRetainedFields([stays], [[stays, kept, grid], [neverExported]], new Set([kept.id, grid.id, gridChild.id]));
    const second = derive("F", merged, asPrevious(first));
    expect(second.map((p) => p.key)).toEqual(first.map((p) => p.key));
    expect(second[0].columns.map((c) => c.key)).toEqual(first[0].columns.map((c) => c.key));
    expect(second[1].columns.map((c) => c.key)).toEqual(first[1].columns.map((c) => c.key));
  });
});

describe("naming properties", () => {
  const fieldArb = fc.record({
    key: fc.string({ unit: fc.constantFrom("a", "b", "_", " ", "-", "é", "Z", "9", "x"), minLength: 0, maxLength: 80 }),
    type: fc.constantFrom("text", "number", "checkboxGroup", "signature", "resourceSelect", "survey"),
    verify: fc.boolean(),
  });
  const toFields = (specs: { key: string; type: string; verify: boolean }[], ids: string[]) =>
    specs.map((s, i) =>
      ({
        id: ids[i],
        key: s.key,
        label: s.key,
        type: s.type,
        requiresVerification: s.verify,
        options: [{ key: s.key, label: "o" }, { key: `${s.key}2`, label: "p" }],
        questions: [{ key: s.key, label: "q" }],
      }) as FormField,
    );

  it("column keys are <= 63 chars of [a-z0-9_], unique, deterministic, and stable when fields are added", () => {
    fc.assert(
      fc.property(fc.array(fieldArb, { maxLength: 12 }), fc.array(fieldArb, { maxLength: 4 }), (specs, extra) => {
        const ids = specs.map((_, i) => `10000000-0000-4000-8000-${String(i).padStart(12, "0")}`);
        const extraIds = extra.map((_, i) => `20000000-0000-4000-8000-${String(i).padStart(12, "0")}`);
        const fields = toFields(specs, ids);
        const [plan] = derive("Prop", fields);
        const keys = plan.columns.map((c) => c.key);
        for (const k of keys) expect(k).toMatch(/^[a-z0-9_]{1,63}$/);
        expect(new Set(keys).size).toBe(keys.length);
        expect(derive("Prop", fields)[0].columns).toEqual(plan.columns);
        // Adding fields (even before the old ones) never renames an existing column.
        const [next] = derive("Prop", [...toFields(extra, extraIds), ...fields], asPrevious([plan]));
        for (const [sourceId, key] of Object.entries(plan.nameAssignments)) expect(next.nameAssignments[sourceId]).toBe(key);
      }),
      { numRuns: 150 },
    );
  });

  it("dataset keys are <= 63 chars, unique within the organization, and stable across rebuilds", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "B", " ", "-", "_", "!"), maxLength: 90 }),
        fc.array(fc.string({ unit: fc.constantFrom("g", " ", "x"), maxLength: 70 }), { maxLength: 4 }),
        fc.array(fc.constantFrom("a", "a_1", "unnamed", "g"), { maxLength: 3 }),
        (formName, gridLabels, taken) => {
          const grids = gridLabels.map((label, i) => ({ id: `30000000-0000-4000-8000-${String(i).padStart(12, "0")}`, key: `g${i}`, label, type: "grid", fields: [] }));
          const plans = derive(formName, grids, [], taken);
          const keys = plans.map((p) => p.key);
          for (const k of keys) {
            expect(k).toMatch(/^[a-z0-9_]{1,63}$/);
            expect(taken).not.toContain(k);
          }
          expect(new Set(keys).size).toBe(keys.length);
          const again = derive(formName, grids, asPrevious(plans), [...taken, ...keys]);
          expect(again.map((p) => p.key)).toEqual(keys);
        },
      ),
      { numRuns: 150 },
    );
  });
});
