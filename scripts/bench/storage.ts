/**
 * `npm run bench:storage`: every dataset kind against the speed of its storage, in one run (issue 27).
 *
 * One organization holds BENCH_ROWS suppliers (21 columns: core columns, product lists, custom
 * attributes), a flat form of BENCH_ROWS submissions (built by `buildDataset`) and one deviation per
 * submission; the four services run as processes on the bench database (scripts/bench/stack.ts).
 *
 *   Part 1, BENCH_RUNS interleaved rounds after one untimed pass of each path (medians):
 *     flat:       the physical limit: a plain table holding the suppliers' 21 CSV columns as text
 *                 (id uuid, last_modified timestamptz), keyset `COPY` pages of BENCH_LIMIT
 *                 (measureRawTable of form-pages.ts, the same loop as a form's raw table loop);
 *     deviations flat: the same limit at the deviations' width: their 43 CSV columns in a plain
 *                 table of their own, read by the same loop (a limit is a flat table of the width
 *                 it bounds: a deviation's row is 1.6 times a supplier's);
 *     resources:  `resources_suppliers` through the full HTTP API, and its page query under raw `COPY`;
 *     deviations: `deviations` through the full HTTP API (its ratio over `deviations flat`; over the
 *                 suppliers' flat table as a plain line), and its page query under raw `COPY`;
 *     resources under writes: `resources_suppliers` through the HTTP API while BENCH_WRITE_RATE
 *                 single-row updates a second go to its suppliers (scripts/bench/writes.ts): pages
 *                 read the rendered table patched with the rows written since its render (a plain
 *                 line, with the writes' commit times, how the table stood, and commit to
 *                 visibility through the HTTP API: not an issue ratio).
 *   Part 2, the form dataset in three scenarios (clean, right after a bulk import, beside another
 *     form's pending backlog), each in BENCH_RUNS rounds of its table's raw keyset `COPY` loop, the
 *     page query, the gRPC stream and the full HTTP export (measureScenario of form-pages.ts).
 *   Part 3, the sync client (scripts/bench/sync.ts, measureSyncBackfillRatios): a backfill of
 *     BENCH_ROWS suppliers, of a form's submission dataset (BENCH_ROWS / 5 rows), its grid and its
 *     nested grid (BENCH_ROWS rows each) into PostgreSQL, SQLite and DuckDB, each over a plain HTTP
 *     export of the same dataset interleaved with it (the submission and nested-grid figures are
 *     plain lines: the RATIO names are the issue's).
 *
 * Before them, one `CEILING <name> <value>` line per ratio: the most it could have been at the CPU
 * its path cost in this run, every core busy throughout (cpuCeiling of ./cpu; "n/a" where /proc
 * cannot be read). Ends with one line per ratio, `RATIO <name> <value>` (rows/s over rows/s of the
 * same run).
 *
 * Environment (all optional):
 *   DATABASE_URL         server for the fresh database (dropped at the end unless BENCH_KEEP=1)
 *   BENCH_DATABASE_NAME  its name (default exportsvc_bench_storage)
 *   BENCH_QUICK=1        100 000 rows instead of 200 000 (under 8 minutes on a 2-core machine)
 *   BENCH_ROWS           suppliers, submissions and deviations each (overrides BENCH_QUICK)
 *   BENCH_LIMIT          page size (default 5000)
 *   BENCH_RUNS           interleaved rounds per part and scenario (default 3)
 *   BENCH_WRITE_RATE     supplier updates a second during the resources-under-writes path (default 200)
 */
import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { migrate } from "@exportsvc/db";
import { buildPageQuery, CursorCodec, CursorKeyring, type ColumnSpec, type PageDataset } from "@exportsvc/datasets";
import { BENCH_DATASET, generateDeviations, generateSuppliers } from "./dataset";
import { openBenchDatabase } from "./database";
import { createBenchForm, measureInScenario, measureRawTable, SCENARIOS } from "./form-pages";
import { envInt, log, median } from "./helpers";
import { measureHttp, measureRawCopy, pageTimesText, payloadPosition, type Measurement } from "./measure";
import { awaitRendered, newBenchCursorKeys, startBenchStack } from "./stack";
import { measureSyncBackfillRatios, type BackfillRatio } from "./sync";
import { cpuNoted, MACHINE_CORES, stackPids } from "./cpu";
import { startSupplierWrites, type WritesOutcome } from "./writes";
import { runAsScript } from "../lib/run-script";

/** The physical limits' flat tables: the suppliers' rendered rows, the deviations'. */
const FLAT_TABLE = "bench_storage_flat";
const DEVIATIONS_FLAT_TABLE = "bench_storage_flat_deviations";

export interface Ratio {
  name: string;
  value: number;
  /** The most the ratio could have been at the CPU its path cost in this run (cpuCeiling; NaN: unknown). */
  ceiling: number;
}

const rate = (m: Measurement) => m.rows / m.seconds;

/**
 * A physical limit's table, `table`: the dataset's CSV columns as its page query renders them
 * (`_cursor` left out), stored as text (id and last_modified typed, for the keyset), with the export
 * index. Returned as a dataset whose columns are table columns, for measureRawTable.
 */
async function createFlatTable(pool: Pool, table: string, dataset: PageDataset, organizationId: string, rows: number, codec: CursorCodec): Promise<PageDataset> {
  const rendered = buildPageQuery(dataset, { organizationId, limit: rows }, codec);
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.query(`CREATE TABLE ${table} AS SELECT '${organizationId}'::uuid AS organization_id, q.* FROM (${rendered}) q`);
  await pool.query(
    `ALTER TABLE ${table} DROP COLUMN "_cursor", ALTER COLUMN id TYPE uuid USING id::uuid,
       ALTER COLUMN last_modified TYPE timestamptz USING last_modified::timestamptz`,
  );
  await pool.query(`CREATE INDEX ON ${table} (organization_id, last_modified, id)`);
  await pool.query(`VACUUM ANALYZE ${table}`);
  const columns: ColumnSpec[] = dataset.columns.map((c) => ({ key: c.key, dataType: c.dataType, source: { kind: "table", column: c.key } }));
  for (const c of columns) if (!/^[a-z_][a-z0-9_]*$/.test(c.key)) throw new Error(`flat table column '${c.key}' is not a plain identifier`);
  // Read like a form's materialized table (measureRawTable reads only tableName and the table columns).
  return { key: table, kind: "submission", sourceRef: table, tableName: table, columns };
}

/** The sync client's targets, in the order their RATIO lines are printed. */
const SYNC_TARGETS = ["postgres", "sqlite", "duckdb"] as const;

/** scripts/bench/sync.ts's SyncBackfillRatios (each target's backfill over a plain HTTP export) as RATIO lines. */
export function syncRatioLines(ratios: Record<(typeof SYNC_TARGETS)[number], { resources: BackfillRatio; grid: BackfillRatio }>): Ratio[] {
  return SYNC_TARGETS.flatMap((target) => [
    { name: `sync_${target}_vs_http_resources`, value: ratios[target].resources.ratio, ceiling: ratios[target].resources.ceiling },
    { name: `sync_${target}_vs_http_grid`, value: ratios[target].grid.ratio, ceiling: ratios[target].grid.ceiling },
  ]);
}

/**
 * The sync client's ratios (issue 27, items 3 and 4): each target's backfill of suppliers and of a
 * grid dataset (5 rows a submission, so as many grid rows as `rows`) over a plain HTTP export of the
 * same dataset, measured by scripts/bench/sync.ts on a source of its own after the server part.
 */
async function syncRatios(rows: number): Promise<Ratio[]> {
  log(`\n[sync client] ${rows.toLocaleString("en")} suppliers and grid rows, each target interleaved with plain exports\n`);
  return syncRatioLines(await measureSyncBackfillRatios({ suppliers: rows, submissions: Math.max(1, Math.round(rows / 5)) }));
}

async function main(): Promise<void> {
  const rows = envInt("BENCH_ROWS", process.env.BENCH_QUICK === "1" ? 100_000 : 200_000);
  const limit = envInt("BENCH_LIMIT", 5000);
  const runs = envInt("BENCH_RUNS", 3);
  const writeRate = envInt("BENCH_WRITE_RATE", 200);
  const { db, pool, close } = await openBenchDatabase("exportsvc_bench_storage");
  const organizationId = randomUUID();
  const cursorKeys = newBenchCursorKeys();
  const codec = new CursorCodec({ keyring: CursorKeyring.parse(cursorKeys) });
  let stack: Awaited<ReturnType<typeof startBenchStack>> | undefined;
  const ratios: Ratio[] = [];
  try {
    await migrate(pool);
    const supplierColumns = await generateSuppliers(pool, organizationId, rows, log);
    const form = await createBenchForm(pool, organizationId, rows, cursorKeys);
    const deviationColumns = await generateDeviations(pool, organizationId, rows, log);
    const suppliers: PageDataset = { key: BENCH_DATASET, kind: "resource", sourceRef: "suppliers", columns: supplierColumns };
    const deviations: PageDataset = { key: "deviations", kind: "deviations", sourceRef: "deviations", columns: deviationColumns };
    const flat = await createFlatTable(pool, FLAT_TABLE, suppliers, organizationId, rows, codec);
    const deviationsFlat = await createFlatTable(pool, DEVIATIONS_FLAT_TABLE, deviations, organizationId, rows, codec);
    await pool.query("CHECKPOINT").catch(() => undefined);
    stack = await startBenchStack(pool, db.url, organizationId, cursorKeys);
    const started = stack;
    const renderSeconds = await awaitRendered(pool, started.stack.baseUrl, started.apiKey, organizationId, [BENCH_DATASET, "deviations"]);
    log(`rendered tables of ${BENCH_DATASET} and deviations current after ${renderSeconds.toFixed(1)} s`);

    // Part 1: the flat limit, resources and deviations, interleaved. The HTTP paths' CPU is noted for their ceilings.
    const pids = stackPids(started.stack);
    const httpCpu = {
      "resources HTTP": cpuNoted(pids, () => measureHttp(started.stack.baseUrl, started.apiKey, BENCH_DATASET, limit)),
      "deviations HTTP": cpuNoted(pids, () => measureHttp(started.stack.baseUrl, started.apiKey, "deviations", limit)),
    };
    const paths: Record<string, () => Promise<Measurement>> = {
      flat: () => measureRawTable(pool, flat, organizationId, limit),
      "deviations flat": () => measureRawTable(pool, deviationsFlat, organizationId, limit),
      "resources query": () => measureRawCopy("resources page query, raw COPY", pool, suppliers, organizationId, codec, limit, payloadPosition),
      "resources HTTP": httpCpu["resources HTTP"].run,
      "deviations query": () => measureRawCopy("deviations page query, raw COPY", pool, deviations, organizationId, codec, limit, payloadPosition),
      "deviations HTTP": httpCpu["deviations HTTP"].run,
      // Last in its round: the table is rendered current again before the next round's paths.
      "resources HTTP, writes": async () => {
        const writes = await startSupplierWrites(pool, db.url, organizationId, BENCH_DATASET, writeRate, { baseUrl: started.stack.baseUrl, apiKey: started.apiKey });
        try {
          await new Promise((resolve) => setTimeout(resolve, 1000)); // a steady state: the table behind its source
          return await measureHttp(started.stack.baseUrl, started.apiKey, BENCH_DATASET, limit);
        } finally {
          writeOutcomes.push(await writes.stop());
          await awaitRendered(pool, started.stack.baseUrl, started.apiKey, organizationId, [BENCH_DATASET]);
        }
      },
    };
    const writeOutcomes: WritesOutcome[] = [];
    for (const run of Object.values(paths)) await run(); // caches, hint bits, the services' JIT
    for (const noted of Object.values(httpCpu)) noted.forget();
    const results: Record<string, Measurement[]> = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
    for (let i = 0; i < runs; i++) for (const [name, run] of Object.entries(paths)) results[name].push(await run());
    const med = (name: string) => median(results[name].map(rate));
    // Each path against the limit of its width: the deviations' paths against their own flat table.
    const limitOf = (name: string) => (name.startsWith("deviations") ? "deviations flat" : "flat");
    const ratioOf = (name: string) => med(name) / med(limitOf(name));
    const rounds = (name: string, limitName = limitOf(name)) => results[name].map((m, i) => (rate(m) / rate(results[limitName][i])).toFixed(2)).join(" / ");
    // Per round against that round's limit, the median kept (as the ratios' rounds).
    const ceilingOf = (name: keyof typeof httpCpu) => httpCpu[name].ceiling(results[name], results[limitOf(name)].map(rate));
    const bytesPerRow = (name: string) => Math.round(results[name].reduce((a, m) => a + m.bytes, 0) / results[name].reduce((a, m) => a + m.rows, 0));
    log(
      `\n[resources and deviations] ${rows.toLocaleString("en")} rows each, pages of ${limit}, ${runs} interleaved rounds (medians; ratio = rows/s over the rows/s of the flat table of the path's width)`,
    );
    for (const name of Object.keys(paths)) {
      const ceiling = name in httpCpu ? ceilingOf(name as keyof typeof httpCpu).note : "";
      const ratio = name === limitOf(name) ? ` (${bytesPerRow(name)} bytes a row)` : `  ratio ${ratioOf(name).toFixed(2)}x over ${limitOf(name)} (rounds ${rounds(name)})${ceiling}`;
      log(`  ${name.padEnd(18)} ${Math.round(med(name)).toLocaleString("en").padStart(9)} rows/s${ratio}; a page, first / last byte ${pageTimesText(results[name])}`);
    }
    log(`  deviations HTTP over the suppliers' flat table (${bytesPerRow("flat")} bytes a row against ${bytesPerRow("deviations HTTP")}): ${(med("deviations HTTP") / med("flat")).toFixed(2)}x (rounds ${rounds("deviations HTTP", "flat")})`);
    const w = writeOutcomes.slice(1); // the untimed pass's left out
    const pct = (x: number) => `${Math.round(100 * x)} %`;
    log(
      `  under writes: ${(w.reduce((a, o) => a + o.writes, 0) / w.reduce((a, o) => a + o.seconds, 0)).toFixed(0)} writes/s, commit p50 ${median(w.map((o) => o.commitMs.p50)).toFixed(2)} ms, p99 ${median(w.map((o) => o.commitMs.p99)).toFixed(2)} ms;` +
        ` the table current ${pct(median(w.map((o) => o.table.current)))}, patched ${pct(median(w.map((o) => o.table.patchable)))}, live ${pct(median(w.map((o) => o.table.live)))} of the time;` +
        ` commit to visibility over HTTP (${w.reduce((a, o) => a + o.visibleMs.probes, 0)} writes followed) p50 ${median(w.map((o) => o.visibleMs.p50))} ms, p99 ${median(w.map((o) => o.visibleMs.p99))} ms, max ${Math.max(...w.map((o) => o.visibleMs.max))} ms`,
    );
    for (const name of ["resources HTTP", "deviations HTTP"]) {
      const expected = name.startsWith("resources") ? rows : results["deviations query"][0].rows;
      for (const m of results[name]) if (m.rows !== expected) throw new Error(`${name}: ${m.rows} rows, expected ${expected}`);
    }
    ratios.push({ name: "resources_http_vs_flat", value: ratioOf("resources HTTP"), ceiling: ceilingOf("resources HTTP").ceiling });
    ratios.push({ name: "deviations_http_vs_flat", value: ratioOf("deviations HTTP"), ceiling: ceilingOf("deviations HTTP").ceiling });

    // Part 2: the form dataset against its own table, per scenario.
    log(`\n[forms] dataset ${form.datasetKey}, ${rows.toLocaleString("en")} submissions\n`);
    for (const scenario of SCENARIOS) {
      const rates = await measureInScenario(scenario, pool, db.url, form, started, codec, limit, runs);
      ratios.push({ name: `forms_http_vs_table_${scenario}`, value: rates.http / rates.raw, ceiling: rates.httpCeiling });
    }
  } finally {
    await stack?.stack.stop();
    await close();
  }
  ratios.push(...(await syncRatios(rows)));
  log(`\nThe most each ratio could have been at the CPU its path cost in this run, every one of the ${MACHINE_CORES} cores busy throughout (a target above it needs less CPU, not less waiting):`);
  for (const r of ratios) log(`CEILING ${r.name} ${Number.isFinite(r.ceiling) ? r.ceiling.toFixed(2) : "n/a"}`);
  log("");
  for (const r of ratios) log(`RATIO ${r.name} ${r.value.toFixed(2)}`);
}

runAsScript(module, main, "bench:storage");
