/**
 * Conformance, black-box over HTTP: paging of form datasets, grid datasets above all. Spec: the CSV
 * endpoint's parameter table (afterRowIndex, limit, from/to), the error table rows about
 * afterRowIndex, "Form datasets: columns" (row_index); docs/contract.md §4 and §7 (grid columns).
 * The data is an organization of its own with known modification times, several submissions sharing
 * one, grids nested two deep and submissions without grid rows.
 */
import { startE2E, type E2E } from "../support/fixture";
import {
  csvPath, field, formOrganization, idFactory, site, waitFor,
  type FormOrganization, type Params, type Row,
} from "../support/forms";
import { parseCsvPage } from "../support/csv";
import { problem } from "./helpers";

const SUBMISSIONS = "line_inspection";
const CHECKS = "line_inspection__checks";
const READINGS = "line_inspection__checks__readings";

interface SeededSubmission {
  name: string;
  lastModified: string;
  completedAt?: string;
  checks: Array<{ item: string; readings: number[] }>;
}

/**
 * Modification order: E (earliest), A, then B and C sharing one last_modified (ordered by id), then D.
 * D has no grid rows, B one, E four.
 */
const SEED: SeededSubmission[] = [
  { name: "A", lastModified: "2024-06-01T10:00:00.000002Z", completedAt: "2024-03-01T08:00:00Z", checks: [{ item: "a1", readings: [1, 2] }, { item: "a2", readings: [] }, { item: "a3", readings: [3] }] },
  { name: "B", lastModified: "2024-06-01T11:00:00.123456Z", completedAt: "2024-03-02T08:00:00Z", checks: [{ item: "b1", readings: [4] }] },
  { name: "C", lastModified: "2024-06-01T11:00:00.123456Z", completedAt: "2024-03-03T08:00:00Z", checks: [{ item: "c1", readings: [] }, { item: "c2", readings: [5, 6] }] },
  { name: "D", lastModified: "2024-06-01T12:00:00Z", checks: [] },
  { name: "E", lastModified: "2024-06-01T09:00:00Z", completedAt: "2024-03-04T08:00:00Z", checks: [{ item: "e1", readings: [] }, { item: "e2", readings: [] }, { item: "e3", readings: [7] }, { item: "e4", readings: [] }] },
];

const rowKey = (r: Row) => `${r.id}/${r.row_index}`;

function lineInspectionDocument(id: (name: string) => string, seed: SeededSubmission[]) {
  return {
    sites: [site(id("site"))],
    forms: [{
      id: id("form"), name: "Line Inspection", recordPrefix: "LI",
      fields: [
        field.text(id("f:shift"), "shift", "Shift"),
        field.grid(id("f:checks"), "checks", "Checks", [
          field.text(id("f:item"), "item", "Item"),
          field.grid(id("f:readings"), "readings", "Readings", [field.number(id("f:value"), "value", "Value")]),
        ]),
      ],
    }],
    submissions: seed.map((s) => ({
      id: id(`sub:${s.name}`), formId: id("form"), siteId: id("site"),
      status: s.completedAt ? ("Completed" as const) : ("InProgress" as const),
      completedAt: s.completedAt ?? null,
      lastModified: s.lastModified,
      values: { shift: s.name, checks: s.checks.map((c) => ({ item: c.item, readings: c.readings.map((value) => ({ value })) })) },
    })),
  };
}

describe("conformance: grid datasets and paging of form datasets", () => {
  let e2e: E2E;
  let org: FormOrganization;
  const id = idFactory();
  const subId = (name: string) => id(`sub:${name}`);
  /** Submission names in the dataset's order: last_modified, then id. */
  let order: string[];

  beforeAll(async () => {
    e2e = await startE2E();
    org = await formOrganization(e2e, lineInspectionDocument(id, SEED));
    await waitFor("the seeded grid rows", async () => (await org.page(READINGS)).rows.length === 7);
    order = [...SEED]
      .sort((a, b) => a.lastModified.localeCompare(b.lastModified) || subId(a.name).localeCompare(subId(b.name)))
      .map((s) => s.name);
    expect(order[0]).toBe("E");
    expect(order[order.length - 1]).toBe("D");
  }, 120_000);
  afterAll(() => e2e?.stop());

  const expectedChecks = () =>
    order.flatMap((name) => SEED.find((s) => s.name === name)!.checks.map((c, i) => [subId(name), String(i + 1), c.item]));

  describe("order and row_index", () => {
    it("a submission dataset is ordered by last_modified, then id", async () => {
      const rows = (await org.page(SUBMISSIONS)).rows;
      expect(rows.map((r) => r.shift)).toEqual(order);
    });

    it("a grid dataset is ordered by last_modified, id, row_index; its rows share the submission's id and last_modified", async () => {
      const rows = (await org.page(CHECKS)).rows;
      expect(rows.map((r) => [r.id, r.row_index, r.item])).toEqual(expectedChecks());
      const submissions = new Map((await org.page(SUBMISSIONS)).rows.map((r) => [r.id, r.last_modified]));
      for (const r of rows) expect(r.last_modified).toBe(submissions.get(r.id));
    });

    it("row_index counts from 1 per submission; a nested grid numbers across the whole submission, with its ancestor's row index", async () => {
      const checks = (await org.page(CHECKS)).rows;
      for (const name of order) {
        const indexes = checks.filter((r) => r.id === subId(name)).map((r) => Number(r.row_index));
        expect(indexes).toEqual(indexes.map((_, i) => i + 1));
      }
      const readings = (await org.page(READINGS)).rows;
      const ofA = readings.filter((r) => r.id === subId("A")).map((r) => [r.row_index, r.checks_row_index, r.value]);
      expect(ofA).toEqual([["1", "1", "1"], ["2", "1", "2"], ["3", "3", "3"]]);
      const ofC = readings.filter((r) => r.id === subId("C")).map((r) => [r.row_index, r.checks_row_index, r.value]);
      expect(ofC).toEqual([["1", "2", "5"], ["2", "2", "6"]]);
    });
  });

  describe("limit on a grid dataset", () => {
    it.each([1, 2, 3])("limit %i: a page never cuts a submission's rows, may exceed the limit by the rest of the group, and the pages add up", async (limit) => {
      const full = (await org.page(CHECKS)).rows;
      const { rows, pages } = await org.pageAll(CHECKS, limit);
      expect(rows.map(rowKey)).toEqual(full.map(rowKey));
      const pageOfSubmission = new Map<string, number>();
      pages.forEach((page, n) => {
        for (const r of page.rows) {
          expect({ id: r.id, page: pageOfSubmission.get(r.id) ?? n }).toEqual({ id: r.id, page: n });
          pageOfSubmission.set(r.id, n);
        }
        // Rows beyond the limit are only the rest of the last counted row's submission.
        if (page.rows.length > limit) {
          const groupId = page.rows[limit - 1].id;
          expect(page.rows.slice(limit).every((r) => r.id === groupId)).toBe(true);
        }
      });
      // E's four rows come first: every limit below 4 has to overshoot at least once.
      expect(pages.some((p) => p.rows.length > limit)).toBe(true);
    });
  });

  it("a submission dataset's group is (last_modified, id): submissions sharing a last_modified are not one group", async () => {
    const { rows, pages } = await org.pageAll(SUBMISSIONS, 1);
    expect(rows.map((r) => r.shift)).toEqual(order);
    expect(pages.map((p) => p.rows.length)).toEqual([...order.map(() => 1), 0]);
  });

  describe("original paging parameters on a grid dataset", () => {
    it("modifiedSince and after without afterRowIndex: 400 MISSING_PARAMETER 'Missing required parameter'", async () => {
      const row = (await org.page(CHECKS)).rows[0];
      const body = await problem(await org.get(csvPath(CHECKS, { modifiedSince: row.last_modified, after: row.id })), 400);
      expect(body).toMatchObject({ errorCode: "MISSING_PARAMETER", title: "Missing required parameter" });
    });

    it("modifiedSince/after/afterRowIndex page exactly like the cursor of that row, mid-submission included", async () => {
      const full = (await org.page(CHECKS)).rows;
      for (const limit of [1, 2, 5000]) {
        for (const row of full) {
          const params: Params = { modifiedSince: row.last_modified, after: row.id, afterRowIndex: row.row_index, limit };
          const byOriginal = (await org.page(CHECKS, params)).rows.map(rowKey);
          const byCursor = (await org.page(CHECKS, { cursor: row._cursor, limit })).rows.map(rowKey);
          expect({ row: rowKey(row), limit, rows: byOriginal }).toEqual({ row: rowKey(row), limit, rows: byCursor });
        }
      }
      // Resuming after a middle row of a submission continues within that submission.
      const middle = full.find((r) => r.id === subId("E") && r.row_index === "2")!;
      const rest = (await org.page(CHECKS, { cursor: middle._cursor, limit: 1 })).rows;
      expect(rest.map((r) => [r.id, r.row_index])).toEqual([[subId("E"), "3"], [subId("E"), "4"]]);
    });

    it("afterRowIndex beyond a submission's last row resumes with the next submission, like the cursor of its last row", async () => {
      const full = (await org.page(CHECKS)).rows;
      const lastOfA = full.filter((r) => r.id === subId("A")).at(-1)!;
      const byOriginal = (await org.page(CHECKS, { modifiedSince: lastOfA.last_modified, after: lastOfA.id, afterRowIndex: 99 })).rows.map(rowKey);
      const byCursor = (await org.page(CHECKS, { cursor: lastOfA._cursor })).rows.map(rowKey);
      expect(byOriginal).toEqual(byCursor);
      expect(byOriginal[0]).not.toContain(subId("A"));
    });

    it("a cursor issued by another dataset of the same form: 400 INVALID_CURSOR", async () => {
      const submission = (await org.page(SUBMISSIONS)).rows[0];
      const check = (await org.page(CHECKS)).rows[0];
      expect((await problem(await org.get(csvPath(CHECKS, { cursor: submission._cursor })), 400)).errorCode).toBe("INVALID_CURSOR");
      expect((await problem(await org.get(csvPath(READINGS, { cursor: check._cursor })), 400)).errorCode).toBe("INVALID_CURSOR");
      expect((await problem(await org.get(csvPath(SUBMISSIONS, { cursor: check._cursor })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("cursor together with afterRowIndex on a grid dataset: 400 INVALID_CURSOR", async () => {
      const check = (await org.page(CHECKS)).rows[0];
      expect((await problem(await org.get(csvPath(CHECKS, { cursor: check._cursor, afterRowIndex: 1 })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("afterRowIndex 0: 400 INVALID_PARAMETER naming afterRowIndex", async () => {
      const row = (await org.page(CHECKS)).rows[0];
      const body = await problem(await org.get(csvPath(CHECKS, { modifiedSince: row.last_modified, after: row.id, afterRowIndex: 0 })), 400);
      expect(body).toMatchObject({ errorCode: "INVALID_PARAMETER", title: "Invalid parameter" });
      expect(Object.keys(body.errors ?? {})).toEqual(["afterRowIndex"]);
    });

    it("afterRowIndex on a submission dataset (no row_index): 400 INVALID_PARAMETER", async () => {
      const row = (await org.page(SUBMISSIONS)).rows[0];
      const body = await problem(await org.get(csvPath(SUBMISSIONS, { modifiedSince: row.last_modified, after: row.id, afterRowIndex: 1 })), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
    });

    it("a submission dataset pages with modifiedSince/after alone, like the cursor", async () => {
      const full = (await org.page(SUBMISSIONS)).rows;
      for (const row of full) {
        const byOriginal = (await org.page(SUBMISSIONS, { modifiedSince: row.last_modified, after: row.id })).rows.map((r) => r.id);
        const byCursor = (await org.page(SUBMISSIONS, { cursor: row._cursor })).rows.map((r) => r.id);
        expect(byOriginal).toEqual(byCursor);
      }
    });
  });

  describe("from / to (completed_at; from inclusive, to exclusive)", () => {
    const window = { from: "2024-03-02T08:00:00Z", to: "2024-03-04T08:00:00Z" };

    it("on a submission dataset", async () => {
      const names = async (params: Params) => (await org.page(SUBMISSIONS, params)).rows.map((r) => r.shift).sort();
      expect(await names(window)).toEqual(["B", "C"]);
      expect(await names({ from: window.from })).toEqual(["B", "C", "E"]); // D was never completed
      expect(await names({ to: window.from })).toEqual(["A"]);
      const rows = (await org.page(SUBMISSIONS, window)).rows;
      for (const r of rows) expect(r.completed_at >= "2024-03-02 08:00:00+00" && r.completed_at < "2024-03-04 08:00:00+00").toBe(true);
    });

    it("on a grid dataset, through its submission's completed_at", async () => {
      const ids = async (key: string, params: Params) => [...new Set((await org.page(key, params)).rows.map((r) => r.id))].sort();
      expect(await ids(CHECKS, window)).toEqual([subId("B"), subId("C")].sort());
      expect(await ids(READINGS, window)).toEqual([subId("B"), subId("C")].sort());
      expect(await ids(CHECKS, { to: window.from })).toEqual([subId("A")]);
      expect((await org.page(CHECKS, window)).rows.map((r) => [r.id, r.row_index])).toEqual(
        expectedChecks().filter(([sid]) => sid === subId("B") || sid === subId("C")).map(([sid, index]) => [sid, index]),
      );
    });

    it("instants are compared exactly: a fraction of a second after 'to' is outside, after 'from' is inside", async () => {
      // Demo organization: TC-1 was completed at 2024-05-20 14:02:30.123456 UTC.
      const recordIds = async (params: Params) => {
        const res = await e2e.get(csvPath("temperature_check", params));
        return parseCsvPage(Buffer.from(await res.arrayBuffer())).rows.map((r) => r.record_id);
      };
      expect(await recordIds({ from: "2024-05-20T14:02:30Z", to: "2024-05-20T14:02:31Z" })).toEqual(["TC-1"]);
      expect(await recordIds({ from: "2024-05-20T14:02:31Z", to: "2024-05-21T00:00:00Z" })).toEqual([]);
      expect(await recordIds({ from: "2024-05-20T00:00:00Z", to: "2024-05-20T14:02:30Z" })).toEqual([]);
    });

    it("combined with paging: a cursor page stays inside the window", async () => {
      const first = (await org.page(CHECKS, { ...window, limit: 1 })).rows;
      expect(first.length).toBeGreaterThanOrEqual(1);
      const rest = (await org.page(CHECKS, { ...window, cursor: first[first.length - 1]._cursor })).rows;
      const all = [...first, ...rest];
      expect(all.map(rowKey)).toEqual((await org.page(CHECKS, window)).rows.map(rowKey));
    });
  });

  it("row_index is renumbered from 1 after an edit removes a grid row; the edit comes back after a held cursor", async () => {
    const ids = idFactory();
    const seed: SeededSubmission[] = [
      { name: "X", lastModified: "2024-06-01T10:00:00Z", completedAt: "2024-03-01T08:00:00Z", checks: [{ item: "x1", readings: [1] }, { item: "x2", readings: [2, 3] }, { item: "x3", readings: [4] }] },
      { name: "Y", lastModified: "2024-06-01T11:00:00Z", completedAt: "2024-03-01T09:00:00Z", checks: [{ item: "y1", readings: [] }] },
    ];
    const own = await formOrganization(e2e, lineInspectionDocument(ids, seed));
    await waitFor("the seeded rows", async () => (await own.page(READINGS)).rows.length === 4);
    const heldChecks = (await own.page(CHECKS)).rows.at(-1)!._cursor;
    const heldReadings = (await own.page(READINGS)).rows.at(-1)!._cursor;
    // Remove the middle row (x2) of X; the document's lastModified is dropped so the edit gets a fresh one.
    const edited = lineInspectionDocument(ids, [{ ...seed[0], checks: [seed[0].checks[0], seed[0].checks[2]] }]);
    delete (edited.submissions[0] as { lastModified?: string }).lastModified;
    await own.apply(edited);
    const checks = await waitFor("the edited submission after the held cursor", async () => {
      const rows = (await own.page(CHECKS, { cursor: heldChecks })).rows;
      return rows.length > 0 ? rows : undefined;
    });
    expect(checks.map((r) => [r.id, r.row_index, r.item])).toEqual([[ids("sub:X"), "1", "x1"], [ids("sub:X"), "2", "x3"]]);
    const readings = (await own.page(READINGS, { cursor: heldReadings })).rows;
    expect(readings.map((r) => [r.row_index, r.checks_row_index, r.value])).toEqual([["1", "1", "1"], ["2", "2", "4"]]);
    // The full export holds no stale rows of X above the new highest row_index.
    const full = (await own.page(CHECKS)).rows.filter((r) => r.id === ids("sub:X"));
    expect(full.map((r) => r.row_index)).toEqual(["1", "2"]);
  });
});
