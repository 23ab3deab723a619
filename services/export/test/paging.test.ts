import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { CursorCodec, CursorKeyring, rowShape, type ColumnSpec } from "@exportsvc/datasets";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { exportPage, registerFixedDataset, startExport, TEST_CURSOR_KEYS, upsertRegistry, type ExportHarness, type Page } from "./support";

let pool: Pool;
let harness: ExportHarness;
let org: string;
const gridTable = `export_test_grid_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
const submissionTable = `export_test_sub_${randomUUID().replace(/-/g, "").slice(0, 12)}`;

/** µs since the Unix epoch of a PostgreSQL timestamptz text (`YYYY-MM-DD HH:MM:SS[.ffffff]+00`). */
function micros(text: string): bigint {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00$/.exec(text);
  if (!m) throw new Error(`not a UTC timestamp: ${text}`);
  return BigInt(Date.parse(`${m[1]}T${m[2]}Z`)) * 1000n + BigInt((m[3] ?? "").padEnd(6, "0"));
}

// Materialized like packages/form-datasets: typed paging columns, then every CSV column as final text (c1..cN).
const gridColumns: ColumnSpec[] = [
  { key: "id", dataType: "uuid", source: { kind: "table", column: "c1" } },
  { key: "last_modified", dataType: "dateTime", source: { kind: "table", column: "c2" } },
  { key: "row_index", dataType: "number", source: { kind: "table", column: "c3" } },
  { key: "temperature", dataType: "number", source: { kind: "table", column: "c4" } },
];
const submissionColumns: ColumnSpec[] = [
  { key: "id", dataType: "uuid", source: { kind: "table", column: "c1" } },
  { key: "completed_at", dataType: "dateTime", source: { kind: "table", column: "c2" } },
  { key: "last_modified", dataType: "dateTime", source: { kind: "table", column: "c3" } },
];

/** 25 suppliers over 6 distinct timestamps (many rows share last_modified). */
let supplierIds: string[];
/** 9 submissions, 1..4 grid rows each, several sharing last_modified. */
let gridRows: Array<{ id: string; row_index: number }>;

beforeAll(async () => {
  pool = testPool();
  harness = await startExport();
  org = await createTestOrganization(pool);
  await registerFixedDataset(pool, org, "resources_suppliers");
  await registerFixedDataset(pool, org, "resources_customers");
  supplierIds = [];
  for (let i = 0; i < 25; i++) {
    const id = randomUUID();
    supplierIds.push(id);
    await pool.query(`INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1,$2,$3,$4)`, [
      org,
      id,
      `S${i}`,
      `2024-01-0${1 + (i % 6)} 00:00:00.000001+00`,
    ]);
  }

  const formId = randomUUID();
  await pool.query(`INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1,$2,'Inspection','IN')`, [org, formId]);
  await pool.query(`CREATE TABLE ${gridTable} (organization_id uuid, id uuid, last_modified timestamptz, completed_at timestamptz, row_index int,
    c1 text, c2 text, c3 text, c4 text, PRIMARY KEY (organization_id, last_modified, id, row_index))`);
  await pool.query(`CREATE TABLE ${submissionTable} (organization_id uuid, id uuid, last_modified timestamptz, completed_at timestamptz,
    c1 text, c2 text, c3 text, PRIMARY KEY (organization_id, last_modified, id))`);
  gridRows = [];
  for (let s = 0; s < 9; s++) {
    const id = randomUUID();
    const lastModified = `2024-02-0${1 + (s % 3)} 12:00:00+00`;
    const completedAt = `2024-03-0${1 + s} 00:00:00+00`;
    await pool.query(`INSERT INTO submissions (organization_id, id, form_id, record_id, completed_at, last_modified) VALUES ($1,$2,$3,$4,$5,$6)`, [
      org,
      id,
      formId,
      `IN-${s}`,
      completedAt,
      lastModified,
    ]);
    await pool.query(`INSERT INTO ${submissionTable} SELECT $1::uuid, $2::uuid, $4::timestamptz, $3::timestamptz, $2::uuid::text, $3::timestamptz::text, $4::timestamptz::text`, [
      org,
      id,
      completedAt,
      lastModified,
    ]);
    for (let r = 1; r <= 1 + (s % 4); r++) {
      await pool.query(`INSERT INTO ${gridTable} SELECT $1::uuid, $2::uuid, $3::timestamptz, $4::timestamptz, $5::int, $2::uuid::text, $3::timestamptz::text, $5::int::text, $6::text`, [
        org,
        id,
        lastModified,
        completedAt,
        r,
        `${s}.${r}`,
      ]);
      gridRows.push({ id, row_index: r });
    }
  }
  // The tables above are written by hand, standing in for the maintenance loop: its pending changes
  // would otherwise (rightly) hold the visibility horizon at these submissions' last_modified.
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  await upsertRegistry(pool, org, { key: "inspection__readings", kind: "grid", sourceRef: formId, columns: gridColumns, tableName: gridTable, parentKey: "inspection" });
  await upsertRegistry(pool, org, { key: "inspection", kind: "submission", sourceRef: formId, columns: submissionColumns, tableName: submissionTable });
});

afterAll(async () => {
  await harness.stop();
  await pool.query(`DROP TABLE IF EXISTS ${gridTable}, ${submissionTable}`);
  await pool.end();
});

const sortKey = (r: Record<string, string>) => [micros(r.last_modified), r.id, Number(r.row_index ?? 0)] as const;
function assertOrdered(rows: Record<string, string>[]) {
  for (let i = 1; i < rows.length; i++) {
    const [a, b] = [sortKey(rows[i - 1]), sortKey(rows[i])];
    const cmp = a[0] !== b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] !== b[1] ? (a[1] < b[1] ? -1 : 1) : a[2] - b[2];
    expect(cmp).toBeLessThan(0);
  }
}

/** Pages a dataset to the end with the cursor loop of docs/contract.md §4; returns every page. */
async function pageWithCursor(datasetKey: string, limit: number): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (;;) {
    const p = await exportPage(harness.client, { organizationId: org, datasetKey, limit, ...(cursor ? { cursor } : {}) });
    pages.push(p);
    if (p.rows.length < limit) return pages;
    cursor = p.rows[p.rows.length - 1]._cursor;
    if (pages.length > 100) throw new Error("paging does not terminate");
  }
}

describe("cursor paging", () => {
  it.each([1, 2, 4, 5, 25, 5000])("pages suppliers to the end with limit %i: ordered, no duplicates, no gaps", async (limit) => {
    const pages = await pageWithCursor("resources_suppliers", limit);
    const rows = pages.flatMap((p) => p.rows);
    assertOrdered(rows);
    expect(rows.map((r) => r.id).sort()).toEqual([...supplierIds].sort());
    // Each supplier is its own position, so every page but the last holds exactly `limit` rows.
    pages.slice(0, -1).forEach((p) => expect(p.rows).toHaveLength(limit));
  });

  it.each([1, 2, 3, 7])("pages a grid dataset with limit %i without ever cutting a submission's rows", async (limit) => {
    const pages = await pageWithCursor("inspection__readings", limit);
    const rows = pages.flatMap((p) => p.rows);
    assertOrdered(rows);
    expect(rows.map((r) => `${r.id}/${r.row_index}`).sort()).toEqual(gridRows.map((r) => `${r.id}/${r.row_index}`).sort());
    const pageOf = new Map<string, number>();
    pages.forEach((p, i) =>
      p.rows.forEach((r) => {
        expect(pageOf.get(r.id) ?? i).toBe(i);
        pageOf.set(r.id, i);
      }),
    );
    pages.slice(0, -1).forEach((p) => expect(p.rows.length).toBeGreaterThanOrEqual(limit));
    // Rows beyond `limit` are only the rest of the limit-th row's group.
    for (const p of pages.filter((page) => page.rows.length > limit)) {
      expect(new Set(p.rows.slice(limit - 1).map((r) => r.id)).size).toBe(1);
    }
    if (limit === 1) expect(pages.some((p) => p.rows.length > limit)).toBe(true);
  });

  it("accepts any row's cursor: the next page starts strictly after that row, finishing its group first", async () => {
    const all = (await exportPage(harness.client, { organizationId: org, datasetKey: "inspection__readings" })).rows;
    const middle = all.findIndex((r, i) => r.row_index === "2" && all[i + 1]?.id === r.id);
    expect(middle).toBeGreaterThanOrEqual(0);
    const next = await exportPage(harness.client, { organizationId: org, datasetKey: "inspection__readings", limit: 1, cursor: all[middle]._cursor });
    expect(next.rows[0]).toMatchObject({ id: all[middle].id, row_index: "3" });
    expect(next.rows.every((r) => r.id === all[middle].id)).toBe(true);
  });

  it("signs each row's cursor in SQL exactly as the TypeScript codec does", async () => {
    const codec = new CursorCodec({ keyring: CursorKeyring.parse(TEST_CURSOR_KEYS) });
    const { rows } = await exportPage(harness.client, { organizationId: org, datasetKey: "inspection__readings", limit: 3 });
    const registered = (await pool.query(`SELECT kind, source_ref FROM dataset_registry WHERE organization_id = $1 AND key = 'inspection__readings'`, [org])).rows[0];
    for (const row of rows) {
      expect(row._cursor).toMatch(/[=]$/);
      expect(row._cursor).toBe(
        codec.encode(
          { lastModifiedMicros: micros(row.last_modified), id: row.id, rowIndex: Number(row.row_index) },
          { organizationId: org, datasetKey: "inspection__readings", rowShape: rowShape({ kind: registered.kind, sourceRef: registered.source_ref }) },
        ),
      );
    }
    expect(rows[0].temperature).toMatch(/^\d+\.\d$/);
  });
});

describe("original paging parameters", () => {
  it("modifiedSince/after page exactly like the cursor", async () => {
    const byCursor = (await pageWithCursor("resources_suppliers", 4)).flatMap((p) => p.rows.map((r) => r.id));
    const seen: string[] = [];
    let last: Record<string, string> | undefined;
    for (;;) {
      const p = await exportPage(harness.client, {
        organizationId: org,
        datasetKey: "resources_suppliers",
        limit: 4,
        ...(last ? { modifiedSinceMicros: micros(last.last_modified), after: last.id } : {}),
      });
      seen.push(...p.rows.map((r) => r.id));
      if (p.rows.length < 4) break;
      last = p.rows[p.rows.length - 1];
    }
    expect(seen).toEqual(byCursor);
  });

  it("modifiedSince/after/afterRowIndex page a grid like the cursor", async () => {
    const byCursor = (await pageWithCursor("inspection__readings", 2)).flatMap((p) => p.rows.map((r) => `${r.id}/${r.row_index}`));
    const seen: string[] = [];
    let last: Record<string, string> | undefined;
    for (;;) {
      const p = await exportPage(harness.client, {
        organizationId: org,
        datasetKey: "inspection__readings",
        limit: 2,
        ...(last ? { modifiedSinceMicros: micros(last.last_modified), after: last.id, afterRowIndex: BigInt(last.row_index) } : {}),
      });
      seen.push(...p.rows.map((r) => `${r.id}/${r.row_index}`));
      if (p.rows.length < 2) break;
      last = p.rows[p.rows.length - 1];
    }
    expect(seen).toEqual(byCursor);
  });
});

describe("from / to", () => {
  it("filter form datasets on the submission's completed_at: from inclusive, to exclusive (grids join back)", async () => {
    const from = BigInt(Date.parse("2024-03-03T00:00:00Z")) * 1000n;
    const to = BigInt(Date.parse("2024-03-06T00:00:00Z")) * 1000n;
    const subs = await exportPage(harness.client, { organizationId: org, datasetKey: "inspection", fromMicros: from, toMicros: to });
    expect(subs.rows.map((r) => r.completed_at).sort()).toEqual([
      "2024-03-03 00:00:00+00",
      "2024-03-04 00:00:00+00",
      "2024-03-05 00:00:00+00",
    ]);
    const grid = await exportPage(harness.client, { organizationId: org, datasetKey: "inspection__readings", fromMicros: from, toMicros: to });
    expect(new Set(grid.rows.map((r) => r.id))).toEqual(new Set(subs.rows.map((r) => r.id)));
  });
});

describe("organizations stay apart", () => {
  it("never shows another organization's rows", async () => {
    const other = await createTestOrganization(pool);
    await registerFixedDataset(pool, other, "resources_suppliers");
    const p = await exportPage(harness.client, { organizationId: other, datasetKey: "resources_suppliers" });
    expect(p.rows).toHaveLength(0);
  });
});
