import type { Pool } from "pg";
import { createLogger } from "@exportsvc/common";
import { CursorCodec, CursorKeyring } from "@exportsvc/datasets";
import { buildDataset } from "@exportsvc/form-datasets";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { field, insertForm, insertSite, insertSubmission } from "../../../packages/form-datasets/test/support";
import { exportPage, startExport, TEST_CURSOR_KEYS, type ExportHarness, type Page } from "./support";

/**
 * Form datasets materialized by packages/form-datasets, exported through real gRPC and COPY. Built as
 * the schema service builds them with the export's CURSOR_KEYS: the rows store their signed cursors.
 */
let pool: Pool;
let harness: ExportHarness;
let org: string;
let datasets: string[];
const submissions: string[] = [];
/** Submission index → number of grid rows. */
const gridRowsOf = (i: number) => 1 + (i % 3);
/** Submissions in export order: last_modified (pairs share one), then id. */
const exportOrder = () =>
  submissions.map((id, i) => ({ id, i, group: Math.floor(i / 2) })).sort((a, b) => a.group - b.group || (a.id < b.id ? -1 : 1));

beforeAll(async () => {
  pool = testPool();
  harness = await startExport({ METRICS_PORT: "0" });
  org = await createTestOrganization(pool);
  const siteId = await insertSite(pool, org, { name: "Plant", timeZone: "Europe/Berlin" });
  const reading = field("number", "value", "Value");
  const passed = field("yesNo", "passed", "Passed");
  const readings = field("grid", "readings", "Readings", { fields: [reading, passed] });
  const operator = field("text", "operator", "Operator");
  const formId = await insertForm(pool, org, "Line Check", [operator, readings]);
  for (let i = 0; i < 6; i++) {
    submissions.push(
      await insertSubmission(pool, org, formId, {
        siteId,
        completedAt: `2024-05-0${i + 1}T10:00:00Z`,
        // Pairs of submissions share last_modified: groups of positions with equal timestamps.
        lastModified: `2024-06-0${1 + Math.floor(i / 2)}T00:00:00.123456Z`,
        values: {
          [operator.id]: i === 0 ? 'Anna, "B"' : i === 1 ? "" : `op ${i}`,
          [readings.id]: Array.from({ length: gridRowsOf(i) }, (_, r) => ({ [reading.id]: r + 0.5, [passed.id]: r % 2 === 0 })),
        },
      }),
    );
  }
  // The engine keeps its own change log; this test builds directly.
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]).catch(() => undefined);
  const result = await buildDataset(pool, org, formId, { cursorCodec: new CursorCodec({ keyring: CursorKeyring.parse(TEST_CURSOR_KEYS) }) });
  expect(result.status).toBe("built");
  datasets = result.datasets;
  await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
});

afterAll(async () => {
  await harness.stop();
  await pool.end();
});

async function pageAll(datasetKey: string, limit: number): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (;;) {
    const p = await exportPage(harness.client, { organizationId: org, datasetKey, limit, ...(cursor ? { cursor } : {}) });
    pages.push(p);
    if (p.rows.length < limit) return pages;
    cursor = p.rows[p.rows.length - 1]._cursor;
  }
}

it("exports the submission dataset's materialized text unchanged, with envelope and field columns", async () => {
  const [submissionKey] = datasets;
  const p = await exportPage(harness.client, { organizationId: org, datasetKey: submissionKey });
  expect(p.header.slice(0, 2)).toEqual(["id", "record_id"]);
  expect(p.header).toContain("operator");
  expect(p.header[p.header.length - 1]).toBe("_cursor");
  expect(p.rows.map((r) => r.id)).toEqual(exportOrder().map((s) => s.id));
  expect(p.rows.find((r) => r.id === submissions[0])).toMatchObject({ operator: 'Anna, "B"', site_name: "Plant", completed_at: "2024-05-01 10:00:00+00", last_modified: "2024-06-01 00:00:00.123456+00" });
  expect(p.rows.find((r) => r.id === submissions[0])!.completed_at_local).toBe("2024-05-01 12:00:00");
  expect(p.raw.split("\n").find((l) => l.startsWith(submissions[1]))).toContain(',"",');
});

it("reads site names from the organization's site map once its site count is known: the same bytes as with the join", async () => {
  const lines: Array<Record<string, unknown>> = [];
  const logged = await startExport({}, undefined, undefined, createLogger("export", "info", { write: (line: string) => void lines.push(JSON.parse(line)) }));
  const lookupOfLastPage = () => lines.filter((l) => l.msg === "export page").at(-1)?.siteNames;
  try {
    const [submissionKey] = datasets;
    const request = { organizationId: org, datasetKey: submissionKey };
    const first = await exportPage(logged.client, request);
    expect(lookupOfLastPage()).toBe("join"); // the count is read in the background, never waited for
    let later = await exportPage(logged.client, request);
    for (let i = 0; lookupOfLastPage() !== "map" && i < 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      later = await exportPage(logged.client, request);
    }
    expect(lookupOfLastPage()).toBe("map");
    expect(later.rows.find((r) => r.id === submissions[0])).toMatchObject({ site_name: "Plant" });
    expect(later.raw).toBe(first.raw);
    // One site, but a page of one row: the join costs less than building the map.
    await exportPage(logged.client, { ...request, limit: 1 });
    expect(lookupOfLastPage()).toBe("join");
  } finally {
    await logged.stop();
  }
});

it("pages the grid dataset with limit 1 without cutting a submission's rows; booleans t/f, numbers plain", async () => {
  const gridKey = datasets.find((k) => k.endsWith("__readings"))!;
  const pages = await pageAll(gridKey, 1);
  const rows = pages.flatMap((p) => p.rows);
  expect(rows).toHaveLength(1 + 2 + 3 + 1 + 2 + 3);
  for (const p of pages.filter((page) => page.rows.length > 0)) expect(new Set(p.rows.map((r) => r.id)).size).toBe(1);
  expect(pages.map((p) => p.rows.length).filter((n) => n > 0)).toEqual(exportOrder().map((s) => gridRowsOf(s.i)));
  const third = rows.filter((r) => r.id === submissions[2]);
  expect(third.map((r) => [r.row_index, r.value, r.passed])).toEqual([
    ["1", "0.5", "t"],
    ["2", "1.5", "f"],
    ["3", "2.5", "t"],
  ]);
});

it("filters on completed_at (from inclusive, to exclusive), grids by their submission", async () => {
  const gridKey = datasets.find((k) => k.endsWith("__readings"))!;
  const micros = (iso: string) => BigInt(Date.parse(iso)) * 1000n;
  const range = { fromMicros: micros("2024-05-02T10:00:00Z"), toMicros: micros("2024-05-04T10:00:00Z") };
  const subs = await exportPage(harness.client, { organizationId: org, datasetKey: datasets[0], ...range });
  expect(subs.rows.map((r) => r.id)).toEqual([submissions[1], submissions[2]]);
  const grid = await exportPage(harness.client, { organizationId: org, datasetKey: gridKey, ...range });
  expect(new Set(grid.rows.map((r) => r.id))).toEqual(new Set([submissions[1], submissions[2]]));
  expect(grid.rows).toHaveLength(2 + 3);
});

it("serves the cursors stored with the rows, signs them where the table's key is not in its ring, and counts which", async () => {
  const formPages = async () => {
    const text = await (await fetch(`http://127.0.0.1:${harness.service.metricsPort}/metrics`)).text();
    const count = (source: string) => Number(text.split("\n").find((l) => l.startsWith(`export_form_pages_total{source="${source}"}`))?.split(" ").pop());
    return { stored: count("stored"), signed: count("signed") };
  };
  const before = await formPages();
  expect(before.signed).toBeGreaterThanOrEqual(0); // exposed from start-up
  const stored = await pageAll(datasets[0], 2);
  const afterStored = await formPages();
  expect(afterStored.stored - before.stored).toBe(stored.length);
  expect(afterStored.signed).toBe(before.signed);

  // A table signed by a key this export does not have: its pages sign every row, and still page.
  const formId = await insertForm(pool, org, "Other Ring", [field("text", "note", "Note")]);
  for (let i = 0; i < 3; i++) await insertSubmission(pool, org, formId, { lastModified: `2024-07-0${i + 1}T00:00:00Z` });
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  const other = await buildDataset(pool, org, formId, { cursorCodec: new CursorCodec({ keyring: CursorKeyring.parse("77:a-key-the-export-does-not-have") }) });
  await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
  const signed = await pageAll(other.datasets[0], 2);
  expect(signed.flatMap((p) => p.rows)).toHaveLength(3);
  const afterSigned = await formPages();
  expect(afterSigned.signed - afterStored.signed).toBe(signed.length);
  expect(afterSigned.stored).toBe(afterStored.stored);
});
