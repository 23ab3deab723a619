import { Client, Pool } from "pg";
import { buildPageQuery, CursorCodec, CursorKeyring, loadRegistryEntry, pageHorizon, rowShape, STORED_CURSOR_COLUMN } from "@exportsvc/datasets";
import { testDatabaseUrl } from "../../../test/support/db";
import { hash8 } from "@exportsvc/naming";
import { applyPendingChanges, buildDataset, startMaintenanceLoop, type FormField } from "../src";
import {
  changeVersion,
  createTestOrganization,
  datasetRows,
  field,
  insertForm,
  insertSite,
  insertSubmission,
  publish,
  registryRow,
  registryRows,
  tableExists,
  testPool,
  uuid,
} from "./support";

// One file for every database test of the engine, run serially: tests that drain the change log must
// not run beside tests that count rebuilds.
let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(async () => {
  await pool.end();
});

/** Build requests queued by publishing in a test that calls buildDataset itself. */
const discardQueuedRebuilds = (orgId: string) => pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1 AND kind = 'rebuild'", [orgId]);

/**
 * Drains one organization's change log until nothing is left to do (only its own: suites of other
 * packages run beside this one and own their organizations' registries).
 */
async function drain(organizationId: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const r = await applyPendingChanges(pool, { batchSize: 200, organizationId });
    if (r.consumed === 0 && r.rebuilds === 0 && r.deferred === 0) return;
  }
  throw new Error("change log did not drain");
}

describe("rebuild: every value form", () => {
  it("renders envelope and field columns as their final CSV text", async () => {
    const orgId = await createTestOrganization(pool);
    const siteParent = await insertSite(pool, orgId, { name: "North", timeZone: "Europe/Berlin" });
    const parentPath = (await pool.query("SELECT path FROM sites WHERE id = $1", [siteParent])).rows[0].path;
    const siteId = await insertSite(pool, orgId, { name: "Plant 1", timeZone: "Europe/Berlin", parentPath });
    const fields: FormField[] = [
      field("text", "operator", "Operator"),
      field("number", "temperature", "Temperature", { requiresVerification: true }),
      field("yesNo", "passed", "Passed"),
      field("date", "production_date", "Production date"),
      field("dateTime", "sampled_local", "Sampled"),
      field("time", "shift", "Shift"),
      field("select", "line", "Line", { options: [{ key: "l1", label: "Line 1" }] }),
      field("checkboxGroup", "allergens", "Allergens", { options: [{ key: "milk", label: "Milk" }, { key: "nuts", label: "Nuts" }] }),
      field("survey", "quality", "Quality", { options: [{ key: "good", label: "Good" }], questions: [{ key: "taste", label: "Taste" }, { key: "smell", label: "Smell" }] }),
      field("signature", "approver", "Approver"),
      field("resourceSelect", "supplier", "Supplier", { resourceKind: "suppliers" }),
      field("attachment", "files", "Files"),
      field("photo", "pictures", "Pictures"),
      field("heading", "h", "Heading"),
    ];
    const byKey = Object.fromEntries(fields.map((f) => [f.key, f.id]));
    const formId = await insertForm(pool, orgId, "Value Forms", fields);
    const supplierId = uuid();
    const full = await insertSubmission(pool, orgId, formId, {
      siteId,
      recordId: "F-1",
      status: "Completed",
      startedAt: "2024-03-01T08:00:00Z",
      completedAt: "2024-03-01T09:30:15.250Z",
      lastModified: "2024-07-01T12:00:00Z",
      values: {
        [byKey.operator]: 'Anna, "B"',
        [byKey.temperature]: 12.5,
        [byKey.passed]: true,
        [byKey.production_date]: "2024-02-29",
        [byKey.sampled_local]: "2024-03-01T10:00:00+01:00",
        [byKey.shift]: "06:30",
        [byKey.line]: "l1",
        [byKey.allergens]: ["milk"],
        [byKey.quality]: { taste: "good", smell: "gone" },
        [byKey.approver]: { name: "Boss", date: "2024-03-02T00:00:00Z" },
        [byKey.supplier]: { id: supplierId.toUpperCase(), record: { id: supplierId, name: "Acme" } },
        [byKey.files]: ["a.pdf", "b.pdf"],
        [byKey.pictures]: [],
      },
      verifications: { [byKey.temperature]: "2024-03-01T09:00:00.123456Z" },
    });
    const sparse = await insertSubmission(pool, orgId, formId, {
      status: "InProgress",
      archived: true,
      lastModified: "2024-07-02T00:00:00Z",
      values: {
        [byKey.temperature]: "n/a",
        [byKey.passed]: "yes",
        [byKey.production_date]: "2024-02-30",
        [byKey.sampled_local]: "2024-03-01 10:00",
        [byKey.line]: "removed-option",
        [byKey.supplier]: { id: "not-a-uuid" },
      },
    });
    await discardQueuedRebuilds(orgId);

    const result = await buildDataset(pool, orgId, formId);
    expect(result).toMatchObject({ status: "built", datasets: ["value_forms"] });
    const rows = await datasetRows(pool, orgId, "value_forms");
    expect(rows).toEqual([
      {
        id: full,
        record_id: "F-1",
        site_id: siteId,
        site_name: "Plant 1",
        site_path: `${siteParent}.${siteId}`,
        status: "Completed",
        is_archived: "f",
        started_at: "2024-03-01 08:00:00+00",
        started_at_local: "2024-03-01 09:00:00",
        completed_at: "2024-03-01 09:30:15.25+00",
        completed_at_local: "2024-03-01 10:30:15.25",
        last_modified: "2024-07-01 12:00:00+00",
        last_modified_local: "2024-07-01 14:00:00",
        operator: 'Anna, "B"',
        temperature: "12.5",
        verification_temperature: "2024-03-01 10:00:00.123456",
        passed: "t",
        production_date: "2024-02-29",
        sampled_local: "2024-03-01 09:00:00+00",
        shift: "06:30",
        line: "Line 1",
        allergens__milk: "t",
        allergens__nuts: "f",
        quality__taste: "Good",
        quality__smell: "gone",
        approver_name: "Boss",
        approver_date: "2024-03-02 00:00:00+00",
        supplier: JSON.stringify({ id: supplierId, name: "Acme" }).replace(/":/g, '": ').replace(/,"/g, ', "'),
        supplier_id: supplierId,
        files: "a.pdf, b.pdf",
        pictures: null,
      },
      {
        id: sparse,
        record_id: expect.any(String),
        site_id: null,
        site_name: null,
        site_path: null,
        status: "InProgress",
        is_archived: "t",
        started_at: null,
        started_at_local: null,
        completed_at: null,
        completed_at_local: null,
        last_modified: "2024-07-02 00:00:00+00",
        last_modified_local: null,
        operator: null,
        temperature: null,
        verification_temperature: null,
        passed: null,
        production_date: null,
        sampled_local: null,
        shift: null,
        line: "removed-option",
        allergens__milk: null,
        allergens__nuts: null,
        quality__taste: null,
        quality__smell: null,
        approver_name: null,
        approver_date: null,
        supplier: null,
        supplier_id: null,
        files: null,
        pictures: null,
      },
    ]);
    const entry = await registryRow(pool, orgId, "value_forms");
    expect(entry).toMatchObject({ kind: "submission", source_ref: formId, display_name: "Value Forms", state: "ready", parent_key: null });
    // In the organization's own schema (issue 15.5: ready for Citus schema-based sharding).
    expect(entry.table_name).toMatch(new RegExp(`^form_ds_${orgId.replace(/-/g, "")}\\.t_[0-9a-f]{16}_g1$`));
    expect(entry.columns.every((c) => c.source.kind === "table")).toBe(true);
    const orgCol = await pool.query(`SELECT DISTINCT organization_id FROM ${entry.table_name}`);
    expect(orgCol.rows).toEqual([{ organization_id: orgId }]);
  });
});

describe("rebuild: tolerant conversions", () => {
  it.each([
    ["number", "007.50", "7.5"],
    ["number", "-3", "-3"],
    ["number", "1e3", "1000"],
    ["number", 1e21, "1000000000000000000000"],
    ["number", "12,5", null],
    // JSON numbers: integers are taken as stored, fractions lose trailing zeros, exponents expand.
    ["number", 42, "42"],
    ["number", -0, "0"],
    ["number", 7.5, "7.5"],
    ["number", 1.5e-7, "0.00000015"],
    ["number", 12345678901234567890, "12345678901234567000"],
    ["number", true, null],
    ["date", "2024-12-31", "2024-12-31"],
    ["date", "2023-02-29", null],
    ["date", "0000-01-01", null],
    ["date", "2024-1-5", null],
    ["dateTime", "2024-01-31T23:59:59.999999Z", "2024-01-31 23:59:59.999999+00"],
    ["dateTime", "2024-06-30 12:00:00-0930", "2024-06-30 21:30:00+00"],
    ["dateTime", "2024-01-01T00:00:00+14:00", "2023-12-31 10:00:00+00"],
    ["dateTime", "2024-01-01T25:00:00Z", null],
    ["dateTime", "tomorrow", null],
    ["yesNo", false, "f"],
    ["yesNo", "true", null],
    ["text", 42, "42"],
    ["attachment", "single.pdf", "single.pdf"],
    // Month-aware strict dates: valid 29th-31st take the fast path, invalid ones stay empty.
    ["date", "2024-02-29", "2024-02-29"],
    ["date", "2023-04-30", "2023-04-30"],
    ["date", "2023-04-31", null],
    ["date", "2023-12-31", "2023-12-31"],
    ["dateTime", "2024-03-31T08:15:00Z", "2024-03-31 08:15:00+00"],
    ["dateTime", "2024-06-31T08:15:00Z", null],
    // Attachment lists: the inline join of short arrays agrees with the aggregate of long ones.
    ["attachment", [], null],
    ["attachment", ["a.pdf"], "a.pdf"],
    ["attachment", [null], null],
    ["attachment", [null, null], null],
    ["attachment", ["a.pdf", null], "a.pdf"],
    ["attachment", [null, "b.pdf"], "b.pdf"],
    ["attachment", ["a.pdf", "b.pdf"], "a.pdf, b.pdf"],
    ["attachment", ["", "b.pdf"], ", b.pdf"],
    ["photo", ["a.jpg", null, "c.jpg"], "a.jpg, c.jpg"],
    ["photo", [1, { x: "y" }], '1, {"x": "y"}'],
    ["photo", { x: "y" }, '{"x": "y"}'],
  ])("%s value %j exports as %j", async (type, value, expected) => {
    const orgId = await createTestOrganization(pool);
    const f = field(type, "v", "V");
    const formId = await insertForm(pool, orgId, "Conversions", [f]);
    await insertSubmission(pool, orgId, formId, { values: { [f.id]: value } });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    expect((await datasetRows(pool, orgId, "conversions")).map((r) => r.v)).toEqual([expected]);
  });

  it("resource select ids: braces, upper case and bare strings normalize; anything else is empty", async () => {
    const orgId = await createTestOrganization(pool);
    const f = field("resourceSelect", "r", "R");
    const formId = await insertForm(pool, orgId, "Refs", [f]);
    const id = uuid();
    const cases = [{ id: `{${id.toUpperCase()}}` }, id, { id: 12 }, { record: { name: "no id" } }];
    for (const [i, value] of cases.entries()) {
      await insertSubmission(pool, orgId, formId, { lastModified: `2024-01-0${i + 1}T00:00:00Z`, values: { [f.id]: value } });
    }
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    expect((await datasetRows(pool, orgId, "refs")).map((r) => [r.r_id, r.r])).toEqual([
      [id, null],
      [id, null],
      [null, null],
      [null, '{"name": "no id"}'],
    ]);
  });
});

describe("rebuild: grids", () => {
  it("writes a form's registry rows (the form and each grid) in one statement", async () => {
    const orgId = await createTestOrganization(pool);
    const inner = field("grid", "inner", "Inner", { fields: [field("text", "x", "X")] });
    const outer = field("grid", "outer", "Outer", { fields: [field("text", "y", "Y"), inner] });
    const formId = await insertForm(pool, orgId, "Registry Writes", [outer]);
    await discardQueuedRebuilds(orgId);
    const statements: string[] = [];
    const recordingPool = new Proxy(pool, {
      get(target, prop) {
        if (prop !== "connect") return Reflect.get(target, prop, target);
        return async () => {
          const client = await target.connect();
          const query = client.query.bind(client) as (...a: unknown[]) => unknown;
          (client as unknown as { query: unknown }).query = (text: string | { text: string }, ...rest: unknown[]) => {
            statements.push(typeof text === "string" ? text : text.text);
            return query(text, ...rest);
          };
          // Restore the pooled client's own query before it goes back to the pool.
          const release = client.release.bind(client);
          client.release = (err?: Error | boolean) => {
            (client as unknown as { query: unknown }).query = query;
            return release(err);
          };
          return client;
        };
      },
    });
    const result = await buildDataset(recordingPool, orgId, formId);
    expect(result.datasets).toEqual(["registry_writes", "registry_writes__outer", "registry_writes__outer__inner"]);
    expect(statements.filter((s) => /INSERT INTO dataset_registry/.test(s))).toHaveLength(1);
    expect((await registryRows(pool, orgId)).filter((r) => r.state === "ready").map((r) => r.key).sort()).toEqual(result.datasets);
  });

  it("three-deep grids: row_index across the submission in the order of enclosing rows, ancestor indexes", async () => {
    const orgId = await createTestOrganization(pool);
    const reading = field("number", "value", "Value");
    const readings = field("grid", "readings", "Readings", { fields: [reading] });
    const batch = field("text", "batch", "Batch");
    const batches = field("grid", "batches", "Batches", { fields: [batch, readings] });
    const line = field("text", "line", "Line");
    const lines = field("grid", "lines", "Lines", { fields: [line, batches] });
    const formId = await insertForm(pool, orgId, "Grid Form", [lines]);
    const rb = (b: string, values: number[]) => ({ [batch.id]: b, [readings.id]: values.map((v) => ({ [reading.id]: v })) });
    const sub = await insertSubmission(pool, orgId, formId, {
      completedAt: "2024-05-05T05:05:05Z",
      values: {
        [lines.id]: [
          { [line.id]: "L1", [batches.id]: [rb("B1", [1, 2]), rb("B2", [3])] },
          { [line.id]: "L2", [batches.id]: [] },
          { [line.id]: "L3", [batches.id]: [rb("B3", [4])] },
        ],
      },
    });
    await discardQueuedRebuilds(orgId);
    const result = await buildDataset(pool, orgId, formId);
    expect(result.datasets).toEqual(["grid_form", "grid_form__lines", "grid_form__lines__batches", "grid_form__lines__batches__readings"]);

    const lm = (await pool.query("SELECT last_modified::text AS t FROM submissions WHERE id = $1", [sub])).rows[0].t;
    const pick = (rows: Record<string, string | null>[], keys: string[]) => rows.map((r) => keys.map((k) => r[k]));
    const lineRows = await datasetRows(pool, orgId, "grid_form__lines");
    expect(lineRows.every((r) => r.id === sub && r.last_modified === lm)).toBe(true);
    expect(pick(lineRows, ["row_index", "line"])).toEqual([["1", "L1"], ["2", "L2"], ["3", "L3"]]);
    expect(pick(await datasetRows(pool, orgId, "grid_form__lines__batches"), ["row_index", "lines_row_index", "batch"])).toEqual([
      ["1", "1", "B1"],
      ["2", "1", "B2"],
      ["3", "3", "B3"],
    ]);
    expect(pick(await datasetRows(pool, orgId, "grid_form__lines__batches__readings"), ["row_index", "lines_row_index", "batches_row_index", "value"])).toEqual([
      ["1", "1", "1", "1"],
      ["2", "1", "1", "2"],
      ["3", "1", "2", "3"],
      ["4", "3", "3", "4"],
    ]);
    const readingsEntry = await registryRow(pool, orgId, "grid_form__lines__batches__readings");
    expect(readingsEntry).toMatchObject({ kind: "grid", parent_key: "grid_form__lines__batches", display_name: "Grid Form - Lines - Batches - Readings" });
    expect(readingsEntry.source_ref).toBe(`${formId}/${lines.id}/${batches.id}/${readings.id}`);
    const typed = await pool.query(`SELECT completed_at::text AS c, row_index FROM ${readingsEntry.table_name} ORDER BY row_index`);
    expect(typed.rows.map((r) => [r.c, r.row_index])).toEqual([1, 2, 3, 4].map((i) => ["2024-05-05 05:05:05+00", i]));
  });
});

describe("rebuild lifecycle", () => {
  it("colliding form names: the first keeps the plain key, later ones get the form-id hash, then a suffix", async () => {
    const orgId = await createTestOrganization(pool);
    const a = await insertForm(pool, orgId, "Audit", []);
    const b = await insertForm(pool, orgId, "audit!", []);
    await discardQueuedRebuilds(orgId);
    expect((await buildDataset(pool, orgId, a)).datasets).toEqual(["audit"]);
    const second = await buildDataset(pool, orgId, b);
    expect(second.datasets[0]).toMatch(/^audit_[0-9a-f]{8}$/);
    // Rebuilding the first again keeps its plain name.
    expect((await buildDataset(pool, orgId, a)).datasets).toEqual(["audit"]);
    expect((await buildDataset(pool, orgId, b)).datasets).toEqual(second.datasets);

    // Should the hashed name be taken as well, a numeric suffix follows.
    const cId = uuid();
    await insertForm(pool, orgId, `Audit ${hash8(cId)}`, []);
    const c = await insertForm(pool, orgId, "AUDIT", [], cId);
    await discardQueuedRebuilds(orgId);
    const owner = await pool.query("SELECT id FROM forms WHERE organization_id = $1 AND name = $2", [orgId, `Audit ${hash8(cId)}`]);
    expect((await buildDataset(pool, orgId, owner.rows[0].id)).datasets).toEqual([`audit_${hash8(cId)}`]);
    expect((await buildDataset(pool, orgId, c)).datasets).toEqual([`audit_${hash8(cId)}_2`]);
  });

  it("forms with equal names rebuilt at the same time get distinct keys", async () => {
    const orgId = await createTestOrganization(pool);
    const forms = await Promise.all([1, 2, 3].map(() => insertForm(pool, orgId, "Same Name", [field("text", "t", "T")])));
    await discardQueuedRebuilds(orgId);
    const results = await Promise.all(forms.map((id) => buildDataset(pool, orgId, id)));
    expect(results.map((r) => r.status)).toEqual(["built", "built", "built"]);
    const keys = results.map((r) => r.datasets[0]);
    expect(new Set(keys).size).toBe(3);
    expect(keys).toContain("same_name");
    const rows = await registryRows(pool, orgId);
    expect(rows.map((r) => r.source_ref).sort()).toEqual([...forms].sort());
  });

  it("63-character names: long form, grid and field names build and export under capped keys", async () => {
    const orgId = await createTestOrganization(pool);
    const long = "Very Long Name ".repeat(6);
    const child = field("text", "k".repeat(80), "Child");
    const grid = field("grid", "g".repeat(80), long, { fields: [child] });
    const sig = field("signature", "s".repeat(80), "Sig");
    const formId = await insertForm(pool, orgId, long, [sig, grid]);
    await insertSubmission(pool, orgId, formId, { values: { [sig.id]: { name: "N", date: "2024-01-01T00:00:00Z" }, [grid.id]: [{ [child.id]: "v" }] } });
    await discardQueuedRebuilds(orgId);
    const built = await buildDataset(pool, orgId, formId);
    expect(built.status).toBe("built");
    for (const key of built.datasets) expect(key.length).toBeLessThanOrEqual(63);
    const [subKey, gridKey] = built.datasets;
    const subRows = await datasetRows(pool, orgId, subKey);
    expect(Object.keys(subRows[0]).slice(13)).toEqual([expect.stringMatching(/^s{54}_[0-9a-f]{8}$/), expect.stringMatching(/^s{54}_[0-9a-f]{8}$/)]);
    expect(Object.values(subRows[0]).slice(13)).toEqual(["N", "2024-01-01 00:00:00+00"]);
    const gridRows = await datasetRows(pool, orgId, gridKey);
    expect(gridRows.map((r) => r["k".repeat(63)])).toEqual(["v"]);
  });

  it("rebuild swaps to a new generation, drops the old table, moves the change counter; rename retires the old key", async () => {
    const orgId = await createTestOrganization(pool);
    const text = field("text", "note", "Note");
    const formId = await insertForm(pool, orgId, "Inspection", [text]);
    await insertSubmission(pool, orgId, formId, { values: { [text.id]: "one" } });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    const first = await registryRow(pool, orgId, "inspection");
    const v1 = await changeVersion(pool, orgId, "inspection");

    await buildDataset(pool, orgId, formId);
    const second = await registryRow(pool, orgId, "inspection");
    expect(second.generation).toBe(first.generation + 1);
    expect(second.table_name).not.toBe(first.table_name);
    expect(second.shape_fingerprint).toBe(first.shape_fingerprint);
    // The replaced table outlives the swap for the grace period, then a maintenance pass drops it.
    expect(await tableExists(pool, first.table_name!)).toBe(true);
    await applyPendingChanges(pool, { organizationId: orgId, dropGraceMs: 60_000 });
    expect(await tableExists(pool, first.table_name!)).toBe(true);
    expect((await applyPendingChanges(pool, { organizationId: orgId, dropGraceMs: 0 })).droppedTables).toBe(1);
    expect(await tableExists(pool, first.table_name!)).toBe(false);
    expect(await changeVersion(pool, orgId, "inspection")).toBeGreaterThan(v1);

    await pool.query("UPDATE forms SET name = 'Inspection 2' WHERE organization_id = $1 AND id = $2", [orgId, formId]);
    await discardQueuedRebuilds(orgId);
    const renamed = await buildDataset(pool, orgId, formId, { dropGraceMs: 0 });
    expect(renamed).toMatchObject({ status: "built", datasets: ["inspection_2"], retired: ["inspection"] });
    expect(await registryRow(pool, orgId, "inspection")).toMatchObject({ state: "retired", table_name: null });
    expect((await datasetRows(pool, orgId, "inspection_2")).map((r) => r.note)).toEqual(["one"]);
    expect(await tableExists(pool, second.table_name!)).toBe(false);

    // The retired key stays taken: another form named like it gets the hash.
    const other = await insertForm(pool, orgId, "Inspection", []);
    await discardQueuedRebuilds(orgId);
    expect((await buildDataset(pool, orgId, other)).datasets[0]).toMatch(/^inspection_[0-9a-f]{8}$/);
  });

  it("removed fields keep their columns (empty for new data); retyped fields change columns; a removed grid keeps its dataset", async () => {
    const orgId = await createTestOrganization(pool);
    const keep = field("text", "keep", "Keep");
    const removed = field("number", "weight", "Weight");
    const retyped = field("text", "status_note", "Status note");
    const child = field("text", "item", "Item");
    const grid = field("grid", "rows", "Rows", { fields: [child] });
    const formId = await insertForm(pool, orgId, "Evolving", [keep, removed, retyped, grid]);
    await insertSubmission(pool, orgId, formId, {
      lastModified: "2024-01-01T00:00:00Z",
      values: { [keep.id]: "k", [removed.id]: 5, [retyped.id]: "x", [grid.id]: [{ [child.id]: "i1" }] },
    });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);

    await publish(pool, orgId, formId, [keep, { ...retyped, type: "checkboxGroup", options: [{ key: "x", label: "X" }] }]);
    await insertSubmission(pool, orgId, formId, { lastModified: "2024-01-02T00:00:00Z", values: { [keep.id]: "k2", [removed.id]: 7, [retyped.id]: ["x"] } });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    const entry = await registryRow(pool, orgId, "evolving");
    expect(entry.columns.slice(13).map((c) => c.key)).toEqual(["keep", "status_note__x", "weight"]);
    const rows = await datasetRows(pool, orgId, "evolving");
    expect(rows.map((r) => [r.keep, r.status_note__x, r.weight])).toEqual([
      ["k", null, "5"],
      ["k2", "t", "7"],
    ]);
    expect((await datasetRows(pool, orgId, "evolving__rows")).map((r) => r.item)).toEqual(["i1"]);
  });

  it("deleted form: the dataset is kept as is and never rebuilt or updated again", async () => {
    const orgId = await createTestOrganization(pool);
    const text = field("text", "note", "Note");
    const formId = await insertForm(pool, orgId, "Frozen", [text]);
    const sub = await insertSubmission(pool, orgId, formId, { values: { [text.id]: "before" } });
    await drain(orgId);
    const before = await registryRow(pool, orgId, "frozen");
    const version = await changeVersion(pool, orgId, "frozen");

    await pool.query("UPDATE forms SET deleted_at = now() WHERE organization_id = $1 AND id = $2", [orgId, formId]);
    await pool.query(`UPDATE submissions SET "values" = $2 WHERE id = $1`, [sub, JSON.stringify({ [text.id]: "after" })]);
    await insertSubmission(pool, orgId, formId, { values: { [text.id]: "new" } });
    await publish(pool, orgId, formId, [text, field("text", "extra", "Extra")]);
    await drain(orgId);
    expect(await buildDataset(pool, orgId, formId)).toMatchObject({ status: "frozen" });

    expect(await registryRow(pool, orgId, "frozen")).toEqual(before);
    expect((await datasetRows(pool, orgId, "frozen")).map((r) => r.note)).toEqual(["before"]);
    expect(await changeVersion(pool, orgId, "frozen")).toBe(version);
  });

  it("deleted form: changes written before the deletion but consumed after it are in the kept dataset", async () => {
    const orgId = await createTestOrganization(pool);
    const text = field("text", "note", "Note");
    const formId = await insertForm(pool, orgId, "Frozen late", [text]);
    const sub = await insertSubmission(pool, orgId, formId, { values: { [text.id]: "before" } });
    await drain(orgId);
    const version = await changeVersion(pool, orgId, "frozen_late");

    // Written while the form was live; the consumer gets to them only after the deletion (a busy or restarted schema service).
    await pool.query(`UPDATE submissions SET "values" = $2, last_modified = clock_timestamp() WHERE id = $1`, [sub, JSON.stringify({ [text.id]: "edited" })]);
    await insertSubmission(pool, orgId, formId, { values: { [text.id]: "late" } });
    await pool.query("UPDATE forms SET deleted_at = clock_timestamp() WHERE organization_id = $1 AND id = $2", [orgId, formId]);
    // Written after the deletion: never shown.
    await insertSubmission(pool, orgId, formId, { values: { [text.id]: "after" } });
    await drain(orgId);

    expect((await datasetRows(pool, orgId, "frozen_late")).map((r) => r.note).sort()).toEqual(["edited", "late"]);
    expect(await changeVersion(pool, orgId, "frozen_late")).not.toBe(version);
  });

  it("a site with a zone PostgreSQL does not know is handled like a blank one: the rebuild fails in the service's words, naming the site", async () => {
    const orgId = await createTestOrganization(pool);
    const mars = await insertSite(pool, orgId, { name: "Olympus Base", timeZone: "UTC" });
    const text = field("text", "note", "Note");
    const formId = await insertForm(pool, orgId, "Martian", [text]);
    await insertSubmission(pool, orgId, formId, { siteId: mars, values: { [text.id]: "m" } });
    await drain(orgId);
    const builtBefore = await registryRow(pool, orgId, "martian");
    expect(builtBefore.state).toBe("ready");

    await pool.query("UPDATE sites SET time_zone = 'Mars/Olympus' WHERE id = $1", [mars]);
    await publish(pool, orgId, formId, [text, field("text", "more", "More")]);
    await drain(orgId);
    const failed = await registryRow(pool, orgId, "martian");
    expect(failed.state).toBe("failed");
    expect(failed.error).toMatch(/Olympus Base.*unknown time zone "Mars\/Olympus"/);
    expect(failed.error).not.toMatch(/not recognized/);
    expect(failed.table_name).toBe(builtBefore.table_name);

    // Fixing the zone queues the blocked rebuild, as for a blank zone.
    await pool.query("UPDATE sites SET time_zone = 'Europe/Paris' WHERE id = $1", [mars]);
    await drain(orgId);
    expect(await registryRow(pool, orgId, "martian")).toMatchObject({ state: "ready", error: null });
  });

  it("a site with a blank time zone fails its form's rebuild (previous table kept) while another form stays ready", async () => {
    const orgId = await createTestOrganization(pool);
    const good = await insertSite(pool, orgId, { timeZone: "America/New_York" });
    const blank = await insertSite(pool, orgId, { name: "No Zone", timeZone: "UTC" });
    const text = field("text", "note", "Note");
    const broken = await insertForm(pool, orgId, "Broken", [text]);
    const healthy = await insertForm(pool, orgId, "Healthy", [text]);
    await insertSubmission(pool, orgId, broken, { siteId: blank, values: { [text.id]: "b" } });
    await insertSubmission(pool, orgId, healthy, { siteId: good, values: { [text.id]: "h" } });
    await drain(orgId);
    const builtBefore = await registryRow(pool, orgId, "broken");

    await pool.query("UPDATE sites SET time_zone = '' WHERE id = $1", [blank]);
    await publish(pool, orgId, broken, [text, field("text", "more", "More")]);
    await publish(pool, orgId, healthy, [text, field("text", "more", "More")]);
    await drain(orgId);

    const failed = await registryRow(pool, orgId, "broken");
    expect(failed.state).toBe("failed");
    expect(failed.error).toMatch(/No Zone.*blank time zone/);
    expect(failed.table_name).toBe(builtBefore.table_name);
    expect(failed.columns).toEqual(builtBefore.columns);
    expect((await datasetRows(pool, orgId, "broken")).map((r) => r.note)).toEqual(["b"]);
    const ok = await registryRow(pool, orgId, "healthy");
    expect(ok.state).toBe("ready");
    expect(ok.columns.map((c) => c.key)).toContain("more");

    // A form that never built gets failed rows too, so its key answers 503 rather than 404.
    const fresh = await insertForm(pool, orgId, "Fresh", [text]);
    await insertSubmission(pool, orgId, fresh, { siteId: blank });
    await discardQueuedRebuilds(orgId);
    expect(await buildDataset(pool, orgId, fresh)).toMatchObject({ status: "failed", datasets: ["fresh"] });
    expect(await registryRow(pool, orgId, "fresh")).toMatchObject({ state: "failed", table_name: null });

    // Fixing the zone queues the blocked rebuilds.
    await pool.query("UPDATE sites SET time_zone = 'Asia/Tokyo' WHERE id = $1", [blank]);
    await drain(orgId);
    expect(await registryRow(pool, orgId, "broken")).toMatchObject({ state: "ready", error: null });
    expect(await registryRow(pool, orgId, "fresh")).toMatchObject({ state: "ready" });
    expect((await registryRow(pool, orgId, "broken")).columns.map((c) => c.key)).toContain("more");
  });
});

describe("incremental maintenance", () => {
  it("publish builds through the change log; inserts, edits and deletes reach the tables; grid rows renumber", async () => {
    const orgId = await createTestOrganization(pool);
    const siteId = await insertSite(pool, orgId, { timeZone: "Asia/Kolkata" });
    const title = field("text", "title", "Title");
    const item = field("text", "item", "Item");
    const grid = field("grid", "items", "Items", { fields: [item] });
    const formId = await insertForm(pool, orgId, "Live", [title, grid]);
    await drain(orgId);
    expect((await registryRows(pool, orgId)).map((r) => [r.key, r.state])).toEqual([
      ["live", "ready"],
      ["live__items", "ready"],
    ]);
    expect(await datasetRows(pool, orgId, "live")).toEqual([]);

    const v0 = await changeVersion(pool, orgId, "live");
    const g0 = await changeVersion(pool, orgId, "live__items");
    const rows = (...names: string[]) => names.map((n) => ({ [item.id]: n }));
    const sub = await insertSubmission(pool, orgId, formId, {
      siteId,
      lastModified: "2024-06-01T00:00:00Z",
      values: { [title.id]: "first", [grid.id]: rows("a", "b", "c") },
    });
    await drain(orgId);
    expect((await datasetRows(pool, orgId, "live")).map((r) => [r.id, r.title, r.last_modified_local])).toEqual([[sub, "first", "2024-06-01 05:30:00"]]);
    expect((await datasetRows(pool, orgId, "live__items")).map((r) => [r.row_index, r.item])).toEqual([
      ["1", "a"],
      ["2", "b"],
      ["3", "c"],
    ]);
    const v1 = await changeVersion(pool, orgId, "live");
    const g1 = await changeVersion(pool, orgId, "live__items");
    expect(v1).toBeGreaterThan(v0);
    expect(g1).toBeGreaterThan(g0);

    // Removing the first grid row renumbers the rest from 1; last_modified follows the submission.
    await pool.query(`UPDATE submissions SET "values" = $2, last_modified = '2024-06-02T00:00:00Z' WHERE id = $1`, [
      sub,
      JSON.stringify({ [title.id]: "edited", [grid.id]: rows("b", "c") }),
    ]);
    await drain(orgId);
    expect((await datasetRows(pool, orgId, "live")).map((r) => r.title)).toEqual(["edited"]);
    expect((await datasetRows(pool, orgId, "live__items")).map((r) => [r.row_index, r.item, r.last_modified])).toEqual([
      ["1", "b", "2024-06-02 00:00:00+00"],
      ["2", "c", "2024-06-02 00:00:00+00"],
    ]);
    expect(await changeVersion(pool, orgId, "live")).toBeGreaterThan(v1);

    // A submission without grid rows does not move the grid dataset's counter.
    const g2 = await changeVersion(pool, orgId, "live__items");
    const other = await insertSubmission(pool, orgId, formId, { values: { [title.id]: "no rows" } });
    await drain(orgId);
    expect(await changeVersion(pool, orgId, "live__items")).toBe(g2);
    expect((await datasetRows(pool, orgId, "live")).map((r) => r.title).sort()).toEqual(["edited", "no rows"]);

    await pool.query("DELETE FROM submissions WHERE organization_id = $1 AND id = $2", [orgId, sub]);
    await drain(orgId);
    expect((await datasetRows(pool, orgId, "live")).map((r) => r.id)).toEqual([other]);
    expect(await datasetRows(pool, orgId, "live__items")).toEqual([]);
    expect(await changeVersion(pool, orgId, "live__items")).toBeGreaterThan(g2);
  });

  it("a first build of a form with submissions moves the changeToken once: the changes it rendered are consumed with it", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Backlog", null);
    for (const t of ["a", "b", "c"]) await insertSubmission(pool, orgId, formId, { values: { [title.id]: t } });
    await publish(pool, orgId, formId, [title]);
    const pending = await pool.query("SELECT count(*)::int AS n FROM form_dataset_changes WHERE organization_id = $1 AND kind = 'submission'", [orgId]);
    expect(pending.rows[0].n).toBe(3);

    await drain(orgId);
    expect((await datasetRows(pool, orgId, "backlog")).map((r) => r.title).sort()).toEqual(["a", "b", "c"]);
    expect(await changeVersion(pool, orgId, "backlog")).toBe(1);
    const left = await pool.query("SELECT count(*)::int AS n FROM form_dataset_changes WHERE organization_id = $1", [orgId]);
    expect(left.rows[0].n).toBe(0);

    // Later changes still flow.
    await pool.query(`UPDATE submissions SET "values" = jsonb_set("values", ARRAY[$2::text], '"z"') WHERE organization_id = $1`, [orgId, title.id]);
    await drain(orgId);
    expect((await datasetRows(pool, orgId, "backlog")).map((r) => r.title)).toEqual(["z", "z", "z"]);
    expect(await changeVersion(pool, orgId, "backlog")).toBe(2);
  });

  it("a rename through the change log moves the key and retires the old one; changes follow the new key", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Before Rename", [title]);
    await insertSubmission(pool, orgId, formId, { values: { [title.id]: "one" } });
    await drain(orgId);
    await pool.query("UPDATE forms SET name = 'After Rename' WHERE organization_id = $1 AND id = $2", [orgId, formId]);
    await insertSubmission(pool, orgId, formId, { values: { [title.id]: "two" } });
    await drain(orgId);
    expect((await registryRows(pool, orgId)).map((r) => [r.key, r.state, r.display_name])).toEqual([
      ["before_rename", "retired", "Before Rename"],
      ["after_rename", "ready", "After Rename"],
    ]);
    expect((await datasetRows(pool, orgId, "after_rename")).map((r) => r.title).sort()).toEqual(["one", "two"]);
  });

  it("applying is idempotent and the log is written in the source transaction (a rolled-back change leaves nothing)", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Idem", [title]);
    await drain(orgId);
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(
        `INSERT INTO submissions (organization_id, id, form_id, record_id, "values") VALUES ($1, $2, $3, 'F-9', '{}')`,
        [orgId, uuid(), formId],
      );
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    const pending = await pool.query("SELECT count(*)::int AS n FROM form_dataset_changes WHERE organization_id = $1", [orgId]);
    expect(pending.rows[0].n).toBe(0);

    const sub = await insertSubmission(pool, orgId, formId, { values: { [title.id]: "x" } });
    await drain(orgId);
    // Replaying the same change (as a crashed consumer would) renders the same single row.
    await pool.query("INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id) VALUES ($1, 'submission', $2, $3)", [orgId, formId, sub]);
    await pool.query("INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id) VALUES ($1, 'submission', $2, $3)", [orgId, formId, sub]);
    await drain(orgId);
    expect((await datasetRows(pool, orgId, "idem")).map((r) => [r.id, r.title])).toEqual([[sub, "x"]]);
  });

  it("concurrent consumers apply every change exactly to the same result", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const item = field("number", "n", "N");
    const grid = field("grid", "g", "G", { fields: [item] });
    const formA = await insertForm(pool, orgId, "Concurrent A", [title, grid]);
    const formB = await insertForm(pool, orgId, "Concurrent B", [title]);
    await drain(orgId);
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      ids.push(await insertSubmission(pool, orgId, i % 2 ? formA : formB, { values: { [title.id]: `t${i}`, [grid.id]: [{ [item.id]: i }, { [item.id]: i + 1 }] } }));
    }
    for (const id of ids.slice(0, 10)) await pool.query(`UPDATE submissions SET status = 'Cancelled' WHERE id = $1`, [id]);
    await Promise.all([1, 2, 3].map(() => applyPendingChanges(pool, { batchSize: 7, organizationId: orgId })));
    await drain(orgId);
    const a = await datasetRows(pool, orgId, "concurrent_a");
    const b = await datasetRows(pool, orgId, "concurrent_b");
    expect(a.length + b.length).toBe(40);
    expect([...a, ...b].filter((r) => r.status === "Cancelled")).toHaveLength(10);
    expect(await datasetRows(pool, orgId, "concurrent_a__g")).toHaveLength(40);
  });

  it("a change the engine cannot render marks the form failed instead of blocking the log", async () => {
    const orgId = await createTestOrganization(pool);
    const siteId = await insertSite(pool, orgId, { timeZone: "UTC" });
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Stuck", [title]);
    await drain(orgId);
    await pool.query("UPDATE sites SET time_zone = 'Not/AZone' WHERE id = $1", [siteId]);
    await drain(orgId);
    await insertSubmission(pool, orgId, formId, { siteId, values: { [title.id]: "x" } });
    await drain(orgId);
    const entry = await registryRow(pool, orgId, "stuck");
    expect(entry.state).toBe("failed");
    expect(entry.error).toMatch(/time zone/);
    const pending = await pool.query("SELECT count(*)::int AS n FROM form_dataset_changes WHERE organization_id = $1", [orgId]);
    expect(pending.rows[0].n).toBe(0);
  });

  it("the maintenance loop wakes on NOTIFY and applies a committed change without being called", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Looped", [title]);
    // A long poll interval: only the notification can make this test pass in time.
    const loop = startMaintenanceLoop(pool, { pollIntervalMs: 600_000, batchSize: 50, organizationId: orgId });
    try {
      const waitFor = async (check: () => Promise<boolean>) => {
        for (let i = 0; i < 200; i++) {
          if (await check()) return;
          await new Promise((r) => setTimeout(r, 50));
        }
        throw new Error("condition not reached");
      };
      await waitFor(async () => (await registryRows(pool, orgId)).some((r) => r.key === "looped" && r.state === "ready"));
      const sub = await insertSubmission(pool, orgId, formId, { values: { [title.id]: "hello" } });
      await waitFor(async () => (await datasetRows(pool, orgId, "looped")).some((r) => r.id === sub && r.title === "hello"));
    } finally {
      await loop.stop();
    }
  });
});

describe("maintenance loop wake-ups", () => {
  it("a wake that arrives after a pass's last look (while the lag is sampled) is not lost until the next poll", async () => {
    const orgId = await createTestOrganization(pool);
    const title = field("text", "title", "Title");
    const formId = await insertForm(pool, orgId, "Late Wake", [title]);
    let gate: Promise<void> | undefined;
    let open = () => undefined as void;
    let sampling = false;
    const loop = startMaintenanceLoop(pool, {
      pollIntervalMs: 600_000,
      lagSampleMs: 600_000,
      organizationId: orgId,
      onLag: async () => {
        sampling = true;
        await gate;
        sampling = false;
      },
    });
    const waitFor = async (what: string, check: () => Promise<boolean> | boolean) => {
      for (let i = 0; i < 300; i++) {
        if (await check()) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`condition not reached: ${what}`);
    };
    try {
      await waitFor("dataset built", async () => (await registryRows(pool, orgId)).some((r) => r.key === "late_wake" && r.state === "ready"));
      await waitFor("first pass over", () => !sampling);
      await new Promise((r) => setTimeout(r, 200));
      // Hold the next pass in its lag sample, after its drain found nothing to do.
      gate = new Promise<void>((resolve) => (open = resolve));
      loop.wake();
      await waitFor("the pass sampling its lag", () => sampling);
      // Committed (and notified) while the pass is past its last look at the change log.
      const sub = await insertSubmission(pool, orgId, formId, { values: { [title.id]: "late" } });
      loop.wake();
      open();
      await waitFor("the late submission applied", async () => (await datasetRows(pool, orgId, "late_wake")).some((r) => r.id === sub && r.title === "late"));
    } finally {
      open();
      await loop.stop();
    }
  });
});

describe("maintenance loop shutdown", () => {
  it("after stop, an error on what was the listener's connection (the database shutting down) is no failed pass", async () => {
    const orgId = await createTestOrganization(pool);
    const applicationName = `loop-stop-${process.pid}-${Date.now()}`;
    // A pool of its own: its connections are terminated below.
    const own = new Pool({ connectionString: testDatabaseUrl(), max: 2, application_name: applicationName });
    own.on("error", () => undefined);
    const errors: unknown[] = [];
    const loop = startMaintenanceLoop(own, { pollIntervalMs: 600_000, organizationId: orgId, onError: (err) => errors.push(err) });
    const listenerPid = async () =>
      (
        await pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'", [applicationName])
      ).rows[0]?.pid;
    try {
      let pid: number | undefined;
      for (let i = 0; i < 200 && pid === undefined; i++) {
        pid = await listenerPid();
        if (pid === undefined) await new Promise((r) => setTimeout(r, 50));
      }
      expect(pid).toBeDefined();
      await loop.stop();
      await pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [applicationName]);
      await new Promise((r) => setTimeout(r, 300));
      expect(errors).toEqual([]);
    } finally {
      await loop.stop();
      await own.end().catch(() => undefined);
    }
  });
});

describe("rebuild: grid entries and parallel rendering", () => {
  it("grid entries that are not objects are skipped, rows number consecutively; a grid value that is not an array has no rows", async () => {
    const orgId = await createTestOrganization(pool);
    const batch = field("text", "batch", "Batch");
    const batches = field("grid", "batches", "Batches", { fields: [batch] });
    const line = field("text", "line", "Line");
    const lines = field("grid", "lines", "Lines", { fields: [line, batches] });
    const formId = await insertForm(pool, orgId, "Messy", [lines]);
    const values = (tag: string) => ({
      [lines.id]: [
        "junk",
        { [line.id]: `${tag}1`, [batches.id]: [1, { [batch.id]: "B1" }, null, ["x"], { [batch.id]: "B2" }] },
        null,
        { [line.id]: `${tag}2`, [batches.id]: { not: "an array" } },
        5,
        { [line.id]: `${tag}3`, [batches.id]: [{ [batch.id]: "B3" }] },
      ],
    });
    const sub = await insertSubmission(pool, orgId, formId, { lastModified: "2024-01-01T00:00:00Z", values: values("L") });
    await insertSubmission(pool, orgId, formId, { lastModified: "2024-01-02T00:00:00Z", values: { [lines.id]: { [line.id]: "not a list" } } });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    const pick = (rows: Record<string, string | null>[], keys: string[]) => rows.map((r) => keys.map((k) => r[k]));
    const expectRows = async (tag: string) => {
      expect(pick(await datasetRows(pool, orgId, "messy__lines"), ["row_index", "line"])).toEqual([["1", `${tag}1`], ["2", `${tag}2`], ["3", `${tag}3`]]);
      expect(pick(await datasetRows(pool, orgId, "messy__lines__batches"), ["row_index", "lines_row_index", "batch"])).toEqual([
        ["1", "1", "B1"],
        ["2", "1", "B2"],
        ["3", "3", "B3"],
      ]);
    };
    await expectRows("L");
    // The incremental path renders the same way.
    await pool.query(`UPDATE submissions SET "values" = $3, last_modified = '2024-01-03T00:00:00Z' WHERE organization_id = $1 AND id = $2`, [orgId, sub, JSON.stringify(values("M"))]);
    await drain(orgId);
    await expectRows("M");
  });

  /** A form with every kind of conversion and two grid levels, with `n` generated submissions. */
  async function wideForm(orgId: string, n: number) {
    const reading = field("number", "reading", "Reading");
    const readings = field("grid", "readings", "Readings", { fields: [reading] });
    const item = field("text", "item", "Item");
    const items = field("grid", "items", "Items", { fields: [item, readings] });
    const when = field("dateTime", "sampled_at", "Sampled At", { requiresVerification: true });
    const day = field("date", "day", "Day");
    const amount = field("number", "amount", "Amount");
    const formId = await insertForm(pool, orgId, "Wide", [field("text", "operator", "Operator"), when, day, amount, items]);
    const site = await insertSite(pool, orgId, { timeZone: "America/New_York" });
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", verifications, last_modified)
       SELECT $1, gen_random_uuid(), $2, 'W-' || i, $3, 'Completed', ts - interval '1 hour', ts,
              jsonb_build_object(
                $4::text, CASE i % 4 WHEN 0 THEN to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') WHEN 1 THEN to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                                      WHEN 2 THEN to_char(ts, 'YYYY-MM-DD HH24:MI:SS+02:00') ELSE 'later' END,
                $5::text, CASE WHEN i % 7 = 0 THEN '2023-02-29' ELSE to_char(ts, 'YYYY-MM-DD') END,
                $6::text, CASE WHEN i % 5 = 0 THEN to_jsonb((i / 8.0)::text) ELSE to_jsonb(i / 4.0) END,
                $7::text, jsonb_build_array(jsonb_build_object($8::text, 'a' || i, $9::text, jsonb_build_array(jsonb_build_object($10::text, i), 'junk', jsonb_build_object($10::text, -i))),
                                            'junk', jsonb_build_object($8::text, 'b' || i))),
              jsonb_build_object($4::text, to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
              ts
         FROM generate_series(1, $11::int) AS i, LATERAL (SELECT timestamptz '2024-03-30' + i * interval '17 minutes' AS ts) x`,
      [orgId, formId, site, when.id, day.id, amount.id, items.id, item.id, readings.id, reading.id, n],
    );
    return formId;
  }

  const allRows = async (orgId: string, keys: string[]) => Object.fromEntries(await Promise.all(keys.map(async (k) => [k, await datasetRows(pool, orgId, k)] as const)));

  it("tables rendered on helper connections equal the tables rendered one at a time", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await wideForm(orgId, 3000);
    await discardQueuedRebuilds(orgId);
    const serial = await buildDataset(pool, orgId, formId, { parallelism: 1, openHelper: () => Promise.reject(new Error("no helper expected")) });
    expect(serial.datasets).toEqual(["wide", "wide__items", "wide__items__readings"]);
    const before = await allRows(orgId, serial.datasets);
    expect(before.wide).toHaveLength(3000);
    expect(before.wide__items__readings).toHaveLength(6000);
    // Odd values take the guarded path within the same rebuild: 29 February 2023 is empty, 'later' too.
    expect(before.wide.filter((r) => r.day === null)).toHaveLength(Math.floor(3000 / 7));
    expect(before.wide.filter((r) => r.sampled_at === null)).toHaveLength(750);

    const { openHelperClient } = await import("../src");
    let helpers = 0;
    const parallel = await buildDataset(pool, orgId, formId, {
      parallelism: 3,
      openHelper: () => {
        helpers++;
        return openHelperClient(pool);
      },
    });
    expect(parallel).toMatchObject({ status: "built", datasets: serial.datasets });
    expect(helpers).toBe(2);
    expect(await allRows(orgId, serial.datasets)).toEqual(before);
    const staged = await pool.query("SELECT count(*)::int AS n FROM form_ds.dataset_tables WHERE organization_id = $1 AND staged", [orgId]);
    expect(staged.rows[0].n).toBe(0);
  });

  it("a helper failing transiently leaves the live datasets as they were; its siblings' staged tables are dropped later", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await wideForm(orgId, 3000);
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId, { parallelism: 1 });
    const live = await registryRows(pool, orgId);
    const before = await allRows(orgId, ["wide", "wide__items", "wide__items__readings"]);

    const { openHelperClient } = await import("../src");
    let helpers = 0;
    const failing = buildDataset(pool, orgId, formId, {
      parallelism: 3,
      openHelper: async () => {
        const client = await openHelperClient(pool);
        // The second helper is cancelled as soon as it starts rendering (SQLSTATE 57014, transient).
        if (++helpers === 2) await client.query("SET statement_timeout = 1");
        return client;
      },
    });
    await expect(failing).rejects.toMatchObject({ code: "57014" });
    expect(await registryRows(pool, orgId)).toEqual(live);
    expect(await allRows(orgId, ["wide", "wide__items", "wide__items__readings"])).toEqual(before);

    // The other helper committed its table as staged; no rebuild holds the form now, so a cleanup pass drops it.
    const staged = await pool.query<{ table_name: string }>("SELECT table_name FROM form_ds.dataset_tables WHERE organization_id = $1 AND staged", [orgId]);
    // Whether a sibling got as far as committing its table before the failure stopped it is a race
    // (it lost on a loaded CI machine); the clean-up of staged tables is covered deterministically by
    // "a staged table is kept while its form's rebuild runs and dropped once the form is free". Here: whatever was staged is dropped.
    const cleaned = await applyPendingChanges(pool, { organizationId: orgId });
    expect(cleaned.droppedTables).toBe(staged.rowCount);
    for (const t of staged.rows) expect(await tableExists(pool, t.table_name)).toBe(false);

    // And the next rebuild succeeds with helpers.
    expect(await buildDataset(pool, orgId, formId)).toMatchObject({ status: "built" });
    expect(await allRows(orgId, ["wide", "wide__items", "wide__items__readings"])).toEqual(before);
  });

  it("helpers that cannot connect leave their tables to the rebuild's own connection", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await wideForm(orgId, 200);
    await discardQueuedRebuilds(orgId);
    const serial = await buildDataset(pool, orgId, formId, { parallelism: 1 });
    const before = await allRows(orgId, serial.datasets);
    let attempts = 0;
    const built = await buildDataset(pool, orgId, formId, {
      parallelism: 3,
      openHelper: () => {
        attempts++;
        return Promise.reject(Object.assign(new Error("sorry, too many clients already"), { code: "53300" }));
      },
    });
    expect(built).toMatchObject({ status: "built", datasets: serial.datasets });
    expect(attempts).toBe(2);
    expect(await allRows(orgId, serial.datasets)).toEqual(before);
  });

  it("a staged table is kept while its form's rebuild runs and dropped once the form is free", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await insertForm(pool, orgId, "Staged", null);
    const table = `form_ds.t_staged_${orgId.slice(0, 8)}`;
    await pool.query(`CREATE TABLE ${table} (organization_id uuid)`);
    await pool.query("INSERT INTO form_ds.dataset_tables (organization_id, table_name, dataset_key, form_id, plan, staged) VALUES ($1, $2, 'staged', $3, '{}', true)", [
      orgId,
      table,
      formId,
    ]);
    const { formLockKeys } = await import("../src/sql-helpers");
    const holder = await pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1, $2)", formLockKeys(orgId, formId));
      expect((await applyPendingChanges(pool, { organizationId: orgId })).droppedTables).toBe(0);
      expect(await tableExists(pool, table)).toBe(true);
    } finally {
      await holder.query("ROLLBACK");
      holder.release();
    }
    expect((await applyPendingChanges(pool, { organizationId: orgId })).droppedTables).toBe(1);
    expect(await tableExists(pool, table)).toBe(false);
  });
});

describe("pending floors (issue 15): pages read the form's floor, which its consumers raise", () => {
  const floorOf = async (orgId: string, formId: string) =>
    (
      await pool.query<{ t: string; held: boolean }>(
        "SELECT (extract(epoch FROM pending_from) * 1000000)::bigint::text AS t, held FROM form_dataset_pending_floors WHERE organization_id = $1 AND form_id = $2",
        [orgId, formId],
      )
    ).rows.map((r) => ({ micros: BigInt(r.t), held: r.held }))[0];
  const stampOf = async (orgId: string, submissionId: string) =>
    BigInt(
      (await pool.query<{ t: string }>("SELECT (extract(epoch FROM last_modified) * 1000000)::bigint::text AS t FROM submissions WHERE organization_id = $1 AND id = $2", [orgId, submissionId]))
        .rows[0].t,
    );

  it("a floor held back by an open writer keeps the page below it, and is raised once nothing holds it", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await insertForm(pool, orgId, "Floored", [field("text", "title", "Title")]);
    await drain(orgId);
    expect(await floorOf(orgId, formId)).toBeDefined(); // the rebuild raised it

    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "source-system" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_current_xact_id()");
      const writerStarted = BigInt((await writer.query<{ t: string }>("SELECT (extract(epoch FROM now()) * 1000000)::bigint::text AS t")).rows[0].t);
      const submission = await insertSubmission(pool, orgId, formId, {});
      const stamp = await stampOf(orgId, submission);
      await drain(orgId);
      expect(await datasetRows(pool, orgId, "floored")).toHaveLength(1);
      const held = await floorOf(orgId, formId);
      expect(held.held).toBe(true);
      expect(held.micros).toBeLessThanOrEqual(writerStarted);
      await writer.query("ROLLBACK");

      // The writer is gone, but the floor still keeps the applied row back until it is raised again.
      const before = await pageHorizon(pool, orgId, formId);
      expect(before.visibleBeforeMicros).toBeLessThanOrEqual(writerStarted);
      expect(before.pendingHeld).toBe(true);
      expect((await applyPendingChanges(pool, { organizationId: orgId })).raisedFloors).toBeGreaterThanOrEqual(1);
      const raised = await floorOf(orgId, formId);
      expect(raised.micros).toBeGreaterThan(stamp);
      expect(raised.held).toBe(false);
      const after = await pageHorizon(pool, orgId, formId);
      expect(after.visibleBeforeMicros).toBeGreaterThan(stamp);
      expect(after.pendingHeld).toBe(false);
    } finally {
      await writer.end();
    }
  });

  it("the maintenance loop raises a held floor once nothing holds it (a step told raiseHeldFloors: false leaves it)", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await insertForm(pool, orgId, "Loop floored", [field("text", "title", "Title")]);
    await drain(orgId);
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: "source-system" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_current_xact_id()");
      const submission = await insertSubmission(pool, orgId, formId, {});
      const stamp = await stampOf(orgId, submission);
      await drain(orgId);
      expect((await floorOf(orgId, formId)).held).toBe(true);
      await writer.query("ROLLBACK");

      // A step told not to raise held floors leaves it held: the loop decides when raising is due.
      expect((await applyPendingChanges(pool, { organizationId: orgId, raiseHeldFloors: false })).raisedFloors).toBe(0);
      expect((await floorOf(orgId, formId)).held).toBe(true);

      // The loop finds nothing to consume, yet raises the held floor, and says so.
      const applied: number[] = [];
      const loop = startMaintenanceLoop(pool, { pollIntervalMs: 600_000, organizationId: orgId, onApplied: (r) => applied.push(r.raisedFloors) });
      try {
        const deadline = Date.now() + 20_000;
        while ((await floorOf(orgId, formId)).held && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      } finally {
        await loop.stop();
      }
      const raised = await floorOf(orgId, formId);
      expect(raised.held).toBe(false);
      expect(raised.micros).toBeGreaterThan(stamp);
      expect(applied.some((n) => n >= 1)).toBe(true);
    } finally {
      await writer.end();
    }
  });

  it("a page never passes a change still pending; consuming it raises the floor past it", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await insertForm(pool, orgId, "Pending", [field("text", "title", "Title")]);
    await drain(orgId);
    const submission = await insertSubmission(pool, orgId, formId, {});
    const stamp = await stampOf(orgId, submission);
    // Not applied yet: the floor raised before it was logged still lies at or before its stamp.
    expect((await pageHorizon(pool, orgId, formId)).visibleBeforeMicros).toBeLessThanOrEqual(stamp);
    await drain(orgId);
    expect((await pageHorizon(pool, orgId, formId)).visibleBeforeMicros).toBeGreaterThan(stamp);
    expect((await floorOf(orgId, formId)).held).toBe(false);
  });
});

describe("stored cursors (issue 15): rows keep their signed _cursor, served only when the keyring signs them alike", () => {
  const codecOf = (...keys: Array<[number, string]>) => new CursorCodec({ keyring: new CursorKeyring(keys.map(([id, secret]) => ({ id, secret: Buffer.from(secret) }))) });
  const signer = codecOf([1, "stored-cursor-secret-one"]);

  /** The first page's cursors as the export would read them with `codec` (or computed, ignoring stored ones). */
  async function pageCursors(orgId: string, key: string, codec: CursorCodec, opts: { computed?: boolean } = {}) {
    const entry = (await loadRegistryEntry(pool, orgId, key))!;
    const dataset = opts.computed ? { ...entry, storedCursorSignature: undefined } : entry;
    const sql = buildPageQuery(dataset, { organizationId: orgId, limit: 1000 }, codec);
    const { rows } = await pool.query<{ _cursor: string }>(sql);
    return { servesStored: sql.includes(STORED_CURSOR_COLUMN), cursors: rows.map((r) => r._cursor) };
  }

  async function storedCursors(orgId: string, key: string): Promise<Array<string | null>> {
    const row = await registryRow(pool, orgId, key);
    const { rows } = await pool.query<{ c: string | null }>(`SELECT ${STORED_CURSOR_COLUMN} AS c FROM ${row.table_name} WHERE organization_id = $1`, [orgId]);
    return rows.map((r) => r.c);
  }

  /**
   * Every cursor of the page is the one computed in the query (or, `sameKey: false`, one of the same
   * position signed by another key of the ring), and verifies under `codec`.
   */
  async function expectServedCursorsExact(orgId: string, key: string, codec: CursorCodec, servesStored: boolean, opts: { sameKey?: boolean } = {}) {
    const served = await pageCursors(orgId, key, codec);
    const computed = await pageCursors(orgId, key, codec, { computed: true });
    expect(served.servesStored).toBe(servesStored);
    expect(computed.servesStored).toBe(false);
    expect(served.cursors.length).toBeGreaterThan(0);
    const position = (text: string) => Buffer.from(text, "base64").subarray(2, 30).toString("hex");
    if (opts.sameKey === false) expect(served.cursors.map(position)).toEqual(computed.cursors.map(position));
    else expect(served.cursors).toEqual(computed.cursors);
    const entry = (await loadRegistryEntry(pool, orgId, key))!;
    const binding = { organizationId: orgId, datasetKey: key, rowShape: rowShape(entry) };
    for (const text of served.cursors) {
      const parsed = codec.parse(text);
      if (!parsed.ok) throw new Error(`cursor ${text}: ${parsed.problem}`);
      expect(codec.verify(parsed.cursor, binding)).toBe(true);
    }
  }

  async function signedForm() {
    const orgId = await createTestOrganization(pool);
    const item = field("text", "item", "Item");
    const grid = field("grid", "items", "Items", { fields: [item] });
    const formId = await insertForm(pool, orgId, "Signed", [field("text", "title", "Title"), grid]);
    const subs: string[] = [];
    for (let i = 0; i < 3; i++) {
      subs.push(
        await insertSubmission(pool, orgId, formId, {
          lastModified: `2024-05-0${i + 1}T00:00:00Z`,
          values: { [grid.id]: [{ [item.id]: `a${i}` }, { [item.id]: `b${i}` }] },
        }),
      );
    }
    await discardQueuedRebuilds(orgId);
    expect((await buildDataset(pool, orgId, formId, { cursorCodec: signer })).status).toBe("built");
    return { orgId, formId, subs, grid, item };
  }

  it("a build stores every row's cursor, byte-identical to the computed one, and records the signature", async () => {
    const { orgId } = await signedForm();
    for (const key of ["signed", "signed__items"]) {
      const stored = await storedCursors(orgId, key);
      expect(stored).toHaveLength(key === "signed" ? 3 : 6);
      expect(stored.every((c) => c !== null)).toBe(true);
      await expectServedCursorsExact(orgId, key, signer, true);
      const entry = (await loadRegistryEntry(pool, orgId, key))!;
      expect(entry.storedCursorSignature).toBe(signer.storedSignature({ organizationId: orgId, datasetKey: key, rowShape: rowShape(entry) }));
    }
  });

  it("maintenance signs the rows it writes with the table's key; a consumer without that key writes them unsigned and pages still carry them", async () => {
    const { orgId, subs, grid, item } = await signedForm();
    const edit = (sub: string, stamp: string, n: number) =>
      pool.query(`UPDATE submissions SET "values" = $3, last_modified = $4 WHERE organization_id = $1 AND id = $2`, [
        orgId,
        sub,
        JSON.stringify({ [grid.id]: Array.from({ length: n }, (_, i) => ({ [item.id]: `e${i}` })) }),
        stamp,
      ]);
    // Rotated: a new signing key, the table's key still in the ring; new rows follow the table's key.
    await edit(subs[0], "2024-06-01T00:00:00Z", 3);
    await applyPendingChanges(pool, { organizationId: orgId, cursorCodec: codecOf([2, "stored-cursor-secret-two"], [1, "stored-cursor-secret-one"]) });
    expect((await storedCursors(orgId, "signed__items")).every((c) => c !== null)).toBe(true);
    await expectServedCursorsExact(orgId, "signed__items", signer, true);

    // Its key retired from the consumer's ring: that submission's rows are stored without.
    await edit(subs[1], "2024-06-02T00:00:00Z", 2);
    await applyPendingChanges(pool, { organizationId: orgId, cursorCodec: codecOf([2, "stored-cursor-secret-two"]) });
    expect((await storedCursors(orgId, "signed__items")).filter((c) => c === null)).toHaveLength(2);
    expect((await storedCursors(orgId, "signed")).filter((c) => c === null)).toHaveLength(1);
    for (const key of ["signed", "signed__items"]) await expectServedCursorsExact(orgId, key, signer, true);
  });

  it("the export serves stored cursors only under a keyring that still has the table's key with the same secret", async () => {
    const { orgId } = await signedForm();
    // Rotated: stored cursors signed by key 1 are still served (and verify); new ones would be key 2's.
    await expectServedCursorsExact(orgId, "signed", codecOf([2, "stored-cursor-secret-two"], [1, "stored-cursor-secret-one"]), true, { sameKey: false });
    expect((await pageCursors(orgId, "signed", codecOf([2, "stored-cursor-secret-two"], [1, "stored-cursor-secret-one"]))).cursors.map((c) => Buffer.from(c, "base64")[1])).toEqual([1, 1, 1]);
    await expectServedCursorsExact(orgId, "signed", codecOf([2, "stored-cursor-secret-two"]), false);
    await expectServedCursorsExact(orgId, "signed", codecOf([1, "another-secret-for-key-one"]), false);
  });

  it("a build without a codec stores none: no column, no signature, cursors computed", async () => {
    const orgId = await createTestOrganization(pool);
    const formId = await insertForm(pool, orgId, "Unsigned", [field("text", "title", "Title")]);
    await insertSubmission(pool, orgId, formId, { lastModified: "2024-05-01T00:00:00Z" });
    await discardQueuedRebuilds(orgId);
    await buildDataset(pool, orgId, formId);
    const entry = (await loadRegistryEntry(pool, orgId, "unsigned"))!;
    expect(entry.storedCursorSignature).toBeUndefined();
    const column = await pool.query("SELECT 1 FROM information_schema.columns WHERE table_schema || '.' || table_name = $1 AND column_name = $2", [
      entry.tableName!.replace(/"/g, ""),
      STORED_CURSOR_COLUMN,
    ]);
    expect(column.rowCount).toBe(0);
    await expectServedCursorsExact(orgId, "unsigned", signer, false);
  });
});
