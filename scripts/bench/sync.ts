/**
 * `npm run bench:sync`: what the reference consumer (packages/sync-client) costs next to a plain
 * full HTTP export of the same data, in the same run.
 *
 *   (a) initial backfill of 200 000 resources_suppliers rows, of a 500 000-row grid dataset
 *       (100 000 submissions with 5 rows each), of the 100 000-row submission dataset and of a
 *       500 000-row nested grid (one row under each grid row) into PostgreSQL, SQLite and DuckDB: rows/s and the
 *       ratio to a plain full export of the same dataset through the HTTP API (bytes counted,
 *       discarded), measured interleaved (plain, target, plain, target, …: each target's reference is
 *       the mean of the plain exports either side of it). The output ends with one
 *       `RATIO sync_<target>_vs_http_<resources|grid> <value>` line per ratio (the submission and
 *       nested-grid ratios are plain lines before them: the issue names the RATIO lines);
 *   (b) an incremental sync of the unchanged organization: requests made (target: one listing, no CSV);
 *   (c) memory: RSS of this process sampled while syncing pages of 5000 rows whose reference field
 *       holds 300 KB (resources_customers.description), peak growth against the page size; then
 *       every such row changed and synced again into the same copy (upserted pages), its growth.
 *
 * Environment (all optional):
 *   DATABASE_URL             server for the bench databases (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_QUICK=1            100 000 rows per dataset (BENCH_SUPPLIERS=100000, BENCH_FORM_SUBMISSIONS=20000)
 *   BENCH_SUPPLIERS          supplier rows (default 200000)
 *   BENCH_FORM_SUBMISSIONS   submissions, 5 grid rows and 5 nested grid rows each (default 100000)
 *   BENCH_WIDE_ROWS          rows with a wide field for (c) (default 5001: one full page of 5000 and one more)
 *   BENCH_WIDE_BYTES         size of the wide field (default 300000)
 *   BENCH_RUNS               runs per measurement, best ratio reported (default 1)
 *   BENCH_SYNC_PARTS         comma-separated parts to run: backfill, incremental, memory (default: all)
 *   BENCH_SYNC_TARGETS       comma-separated targets to measure: postgres, sqlite, duckdb (default: all; RATIO lines only for all)
 *   BENCH_SYNC_KINDS         comma-separated dataset kinds to backfill: resources, submission, grid, nestedGrid (default: all; RATIO lines only for all)
 *   BENCH_KEEP=1             keep the source database (exportsvc_bench_sync)
 *
 * measureSyncBackfillRatios() runs (a) alone for npm run bench:storage.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CursorCodec, CursorKeyring } from "@exportsvc/datasets";
import { createPool, migrate } from "@exportsvc/db";
import { buildDataset } from "@exportsvc/form-datasets";
import { ExportApiClient, SyncEngine, openTarget } from "../../packages/sync-client/src";
import { provisionDatabase } from "./database";
import { generateSuppliers } from "./dataset";
import { ceilingNote, cpuCeiling, cpuLine, cpuSince, cpuSnapshot, stackPids, type CpuAccount, type ProcessIds } from "./cpu";
import { envInt as num, log, secondsSince } from "./helpers";
import { measureHttp, type Measurement } from "./measure";
import { awaitRendered, newBenchCursorKeys, startBenchStack } from "./stack";
import { linkOnDemandPackage } from "../tools/on-demand";
import { runAsScript } from "../lib/run-script";

/** A fresh database on DATABASE_URL's server; drop() always drops it (the source database is kept with BENCH_KEEP=1 below). */
const database = (name: string) => provisionDatabase(name, { keep: false });

/**
 * A form with a grid holding a nested grid: `submissions` submissions of 5 grid rows, each grid row
 * with one nested row, built as the schema service builds it.
 */
async function generateForm(pool: ReturnType<typeof createPool>, orgId: string, submissions: number, cursorKeys: string) {
  const siteId = randomUUID();
  const formId = randomUUID();
  const f = (type: string, key: string, extra: Record<string, unknown> = {}) => ({ id: randomUUID(), key, label: key, type, ...extra });
  const item = f("text", "item");
  const qty = f("number", "qty");
  const ok = f("yesNo", "ok");
  const note = f("text", "note");
  const passed = f("yesNo", "passed");
  const checks = f("grid", "checks", { fields: [note, passed] });
  const grid = f("grid", "items", { fields: [item, qty, ok, checks] });
  const fields = [f("text", "operator"), f("number", "temperature"), grid];
  await pool.query("INSERT INTO sites (organization_id, id, name, time_zone, path) VALUES ($1, $2, 'Plant', 'Europe/Berlin', $3)", [orgId, siteId, siteId]);
  await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench Form', 'B')", [orgId, formId]);
  await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())", [orgId, formId, JSON.stringify(fields)]);
  const nested = (r: number) => `jsonb_build_array(jsonb_build_object($12::text, 'check of item ${r + 1} of ' || i, $13::text, (i + ${r}) % 3 = 0))`;
  const rows = Array.from({ length: 5 }, (_, r) => `jsonb_build_object($6::text, 'item ${r + 1} of ' || i, $7::text, i % 97 + ${r}, $8::text, (i + ${r}) % 2 = 0, $11::text, ${nested(r)})`).join(", ");
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", last_modified)
     SELECT $1, gen_random_uuid(), $2, 'B-' || i, $3, 'Completed', ts - interval '1 hour', ts,
            jsonb_build_object($4::text, 'operator ' || i, $5::text, (i % 1000) / 10.0, $9::text, jsonb_build_array(${rows})), ts
       FROM generate_series(1, $10::int) AS i, LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 second' AS ts) x`,
    [orgId, formId, siteId, fields[0].id, fields[1].id, item.id, qty.id, ok.id, grid.id, submissions, checks.id, note.id, passed.id],
  );
  await pool.query("DELETE FROM form_dataset_changes");
  // As the schema service builds it: the rows store their signed cursors (docs/cursor.md).
  const built = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, cursorCodec: new CursorCodec({ keyring: CursorKeyring.parse(cursorKeys) }) });
  if (built.status !== "built") throw new Error(`form build ${built.status}: ${built.error}`);
  await pool.query("VACUUM ANALYZE");
}

interface SyncMeasurement extends Measurement {
  peakRssGrowthMb?: number;
  /** The incremental pass after `again` (measureSync): rows and peak RSS growth. */
  againRows?: number;
  againPeakRssGrowthMb?: number;
  /** Where the engine's run spent CPU (the target's database opened before, dropped after: not in it). */
  cpu: CpuAccount;
}

type TargetKind = "postgres" | "sqlite" | "duckdb";
const ALL_TARGETS: Array<{ kind: TargetKind; label: string }> = [
  { kind: "postgres", label: "PostgreSQL" },
  { kind: "sqlite", label: "SQLite" },
  { kind: "duckdb", label: "DuckDB" },
];
const TARGETS = process.env.BENCH_SYNC_TARGETS ? ALL_TARGETS.filter((t) => process.env.BENCH_SYNC_TARGETS!.split(",").includes(t.kind)) : ALL_TARGETS;

/**
 * `again`: after the backfill, runs this (a change to every row) and syncs once more into the same
 * copy, an incremental pass whose pages are upserted; its peak RSS growth is `againPeakRssGrowthMb`.
 */
async function measureSync(
  name: string, baseUrl: string, apiKey: string, dataset: string, kind: TargetKind, sampleRss = false, pids: ProcessIds = {}, again?: () => Promise<void>,
): Promise<SyncMeasurement> {
  if (kind === "sqlite") linkOnDemandPackage("better-sqlite3"); // not in npm install: installed on first use
  const dir = kind !== "postgres" ? mkdtempSync(join(tmpdir(), "bench-sync-")) : undefined;
  const pg = kind === "postgres" ? await database("exportsvc_bench_sync_copy") : undefined;
  const url = pg ? pg.url : kind === "sqlite" ? `sqlite:${join(dir!, "copy.db")}` : `duckdb:${join(dir!, "copy.duckdb")}`;
  const client = new ExportApiClient({ baseUrl, apiKey });
  const target = openTarget(url);
  let peak = 0;
  global.gc?.();
  const before = process.memoryUsage().rss;
  const sampler = sampleRss ? setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20) : undefined;
  try {
    await target.open({ writer: true });
    let bytes = 0;
    let pages = 0;
    const started = process.hrtime.bigint();
    const cpuBefore = cpuSnapshot(pids);
    const summary = await new SyncEngine(client, target, {
      only: [dataset],
      onEvent: (e) => {
        if (e.event === "page") {
          bytes += e.bytes;
          pages++;
        }
      },
    }).runOnce();
    const seconds = secondsSince(started);
    const cpu = cpuSince(cpuBefore);
    if (summary.failed.length) throw new Error(`${name}: ${JSON.stringify(summary.failed)}`);
    const measured: SyncMeasurement = { name, rows: summary.rows, bytes, pages, seconds, cpu, peakRssGrowthMb: sampleRss ? (peak - before) / 1e6 : undefined };
    if (again) {
      await again();
      global.gc?.();
      const base = process.memoryUsage().rss;
      peak = base;
      const second = await new SyncEngine(client, target, { only: [dataset] }).runOnce();
      if (second.failed.length || second.rows === 0) throw new Error(`${name}, incremental: ${second.rows} rows, ${JSON.stringify(second.failed)}`);
      measured.againRows = second.rows;
      measured.againPeakRssGrowthMb = (peak - base) / 1e6;
    }
    return measured;
  } finally {
    if (sampler) clearInterval(sampler);
    await target.close();
    await client.close();
    await pg?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

const rowsPerSecond = (m: Measurement) => m.rows / m.seconds;

function line(m: Measurement, referenceRowsPerSecond?: number) {
  const rps = rowsPerSecond(m);
  const ratio = referenceRowsPerSecond ? `  ${(rps / referenceRowsPerSecond).toFixed(2)}x plain export` : "";
  return `${m.name.padEnd(46)} ${String(m.rows).padStart(8)} rows ${m.seconds.toFixed(2).padStart(7)} s ${Math.round(rps).toLocaleString("en").padStart(9)} rows/s ${(m.bytes / 1e6 / m.seconds).toFixed(1).padStart(6)} MB/s${ratio}`;
}

/** Each dataset kind the bench backfills: resources_suppliers, and the form's submission dataset, grid and nested grid. */
const KINDS = ["resources", "submission", "grid", "nestedGrid"] as const;
type DatasetKind = (typeof KINDS)[number];
const KIND_LABELS: Record<DatasetKind, string> = { resources: "resources", submission: "submission", grid: "grid", nestedGrid: "nested grid" };
const SELECTED_KINDS = process.env.BENCH_SYNC_KINDS ? KINDS.filter((k) => process.env.BENCH_SYNC_KINDS!.split(",").includes(k)) : KINDS;

/**
 * A backfill over a plain export of the same dataset, and the most it could have been at the CPU
 * it cost (cpuCeiling: NaN where /proc cannot be read).
 */
export interface BackfillRatio {
  ratio: number;
  ceiling: number;
}

/** Before any round: no ratio yet, its ceiling unknown. */
const noRatio = (): BackfillRatio => ({ ratio: 0, ceiling: NaN });

/** Per target, its backfill over a plain export of the same dataset, per dataset kind. */
export type SyncBackfillRatios = Record<TargetKind, Record<DatasetKind, BackfillRatio>>;

/** The bench's source: suppliers and a form with a nested grid, built, behind a running stack. */
async function withSource<T>(
  options: { suppliers: number; submissions: number },
  work: (source: { pool: ReturnType<typeof createPool>; organizationId: string; baseUrl: string; apiKey: string; datasets: Record<DatasetKind, string>; pids: ProcessIds }) => Promise<T>,
): Promise<T> {
  const source = await database("exportsvc_bench_sync");
  const pool = createPool({ connectionString: source.url, max: 4 });
  const organizationId = "0b0b0b0b-0000-4000-8000-00000000be01";
  try {
    await migrate(pool);
    await generateSuppliers(pool, organizationId, options.suppliers, log);
    const t = Date.now();
    const cursorKeys = newBenchCursorKeys();
    await generateForm(pool, organizationId, options.submissions, cursorKeys);
    log(`generated ${options.submissions} submissions (${options.submissions * 5} grid rows, as many nested ones) and built their datasets in ${Date.now() - t} ms`);
    const { stack, apiKey } = await startBenchStack(pool, source.url, organizationId, cursorKeys);
    try {
      const listing = await new ExportApiClient({ baseUrl: stack.baseUrl, apiKey }).listing();
      if (listing.notModified) throw new Error("unexpected 304");
      const grid = listing.datasets.find((d) => d.parentDataset && !listing.datasets.find((p) => p.key === d.parentDataset)?.parentDataset)!;
      const nestedGrid = listing.datasets.find((d) => d.parentDataset === grid.key)!;
      const datasets = { resources: "resources_suppliers", submission: grid.parentDataset!, grid: grid.key, nestedGrid: nestedGrid.key };
      // As in production before a first backfill: the suppliers' rendered table is current (docs/export.md, "Rendered datasets").
      const renderSeconds = await awaitRendered(pool, stack.baseUrl, apiKey, organizationId, [datasets.resources]);
      log(`rendered table of ${datasets.resources} current after ${renderSeconds.toFixed(1)} s`);
      const pids = stackPids(stack);
      return await work({ pool, organizationId, baseUrl: stack.baseUrl, apiKey, datasets, pids });
    } finally {
      await stack.stop();
    }
  } finally {
    await pool.end();
    if (process.env.BENCH_KEEP !== "1") await source.drop();
  }
}

/**
 * (a) for one dataset, after one untimed plain export, interleaved: plain, PostgreSQL, plain, SQLite, plain, DuckDB, plain; each
 * target's ratio against the mean rows/s of the plain exports either side of it (the machine's load
 * drifts). `runs` rounds, the best ratio of each target kept, with the ceiling of its round.
 */
async function backfillRatios(baseUrl: string, apiKey: string, dataset: string, runs: number, targets = ALL_TARGETS, pids: ProcessIds = {}): Promise<Record<TargetKind, BackfillRatio>> {
  const best: Record<TargetKind, BackfillRatio> = { postgres: noRatio(), sqlite: noRatio(), duckdb: noRatio() };
  /** Each measurement's line, then where its CPU went (the machine's other work included). */
  const logged = <M extends Measurement>(m: M, cpu: CpuAccount): M => {
    log(line(m));
    log(`    ${cpuLine(cpu)}`);
    return m;
  };
  // One untimed pass first: the first export of a dataset is cold (its pages' plans, caches and the
  // services' code paths warm up), and as a reference it made the first target measured look faster.
  await measureHttp(baseUrl, apiKey, dataset, 5000);
  for (let run = 0; run < runs; run++) {
    const plain = async () => {
      const cpuBefore = cpuSnapshot(pids);
      const m = await measureHttp(baseUrl, apiKey, dataset, 5000);
      return logged({ ...m, name: `plain HTTP export ${dataset}` }, cpuSince(cpuBefore));
    };
    let before = await plain();
    for (const { kind, label } of targets) {
      const measured = await measureSync(`sync ${dataset} → ${label}`, baseUrl, apiKey, dataset, kind, false, pids);
      const synced = logged(measured, measured.cpu);
      const after = await plain();
      if (synced.rows !== before.rows) throw new Error(`row counts differ: export ${before.rows}, ${label} ${synced.rows}`);
      const reference = (rowsPerSecond(before) + rowsPerSecond(after)) / 2;
      const ratio = rowsPerSecond(synced) / reference;
      const ceiling = cpuCeiling(synced.rows, synced.cpu, reference);
      log(`    ${label}: ${ratio.toFixed(2)}x the plain exports either side${ceilingNote(ceiling, synced.cpu.machine)}`);
      if (ratio > best[kind].ratio) best[kind] = { ratio, ceiling };
      before = after;
    }
  }
  return best;
}

/** Every dataset kind of `kinds` backfilled into each of `targets`, `runs` interleaved rounds per kind (best ratio kept); logs one line per target. */
async function allKindRatios(baseUrl: string, apiKey: string, datasets: Record<DatasetKind, string>, runs: number, targets = ALL_TARGETS, kinds: readonly DatasetKind[] = KINDS, pids: ProcessIds = {}): Promise<SyncBackfillRatios> {
  const ratios = Object.fromEntries(ALL_TARGETS.map(({ kind }) => [kind, Object.fromEntries(KINDS.map((k) => [k, noRatio()]))])) as SyncBackfillRatios;
  for (const kind of kinds) {
    const measured = await backfillRatios(baseUrl, apiKey, datasets[kind], runs, targets, pids);
    for (const { kind: target } of ALL_TARGETS) ratios[target][kind] = measured[target];
  }
  for (const { kind: target, label } of targets) {
    const at = (r: BackfillRatio) => `${r.ratio.toFixed(2)}x${Number.isFinite(r.ceiling) ? ` (at most ${r.ceiling.toFixed(2)}x at its CPU cost)` : ""}`;
    log(`backfill into ${label} over the plain export: ${kinds.map((k) => `${KIND_LABELS[k]} ${at(ratios[target][k])}`).join(", ")}`);
  }
  return ratios;
}

/**
 * bench:storage's part of this bench: the backfill ratios of every dataset kind on a source of its
 * own (`suppliers` supplier rows; `submissions` submissions of 5 grid rows and 5 nested grid rows
 * each, so 20 000 for 100 000-row grids), one interleaved round per dataset. Uses the databases
 * exportsvc_bench_sync and exportsvc_bench_sync_copy: not beside a running bench:sync.
 */
export async function measureSyncBackfillRatios(options: { suppliers: number; submissions: number }): Promise<SyncBackfillRatios> {
  return withSource(options, ({ baseUrl, apiKey, datasets, pids }) => allKindRatios(baseUrl, apiKey, datasets, 1, ALL_TARGETS, KINDS, pids));
}

export function ratioLines(r: SyncBackfillRatios): string[] {
  return (["postgres", "sqlite", "duckdb"] as const).flatMap((kind) => [
    `RATIO sync_${kind}_vs_http_resources ${r[kind].resources.ratio.toFixed(3)}`,
    `RATIO sync_${kind}_vs_http_grid ${r[kind].grid.ratio.toFixed(3)}`,
  ]);
}

async function main() {
  const quick = process.env.BENCH_QUICK === "1";
  const suppliers = num("BENCH_SUPPLIERS", quick ? 100_000 : 200_000);
  const submissions = num("BENCH_FORM_SUBMISSIONS", quick ? 20_000 : 100_000);
  const wideRows = num("BENCH_WIDE_ROWS", 5001);
  const wideBytes = num("BENCH_WIDE_BYTES", 300_000);
  const runs = num("BENCH_RUNS", 1);
  const parts = new Set((process.env.BENCH_SYNC_PARTS || "backfill,incremental,memory").split(",").map((p) => p.trim()));
  let ratios: SyncBackfillRatios | undefined;
  await withSource({ suppliers, submissions }, async ({ pool, organizationId, baseUrl, apiKey, datasets, pids }) => {
    if (parts.has("backfill")) {
      log(`\nbackfill, pages of 5000, interleaved with plain exports, best of ${runs} (load average ${loadAverage()}):`);
      ratios = await allKindRatios(baseUrl, apiKey, datasets, runs, TARGETS, SELECTED_KINDS, pids);
      log(`targets: PostgreSQL and DuckDB >= 0.70x, SQLite >= 0.50x (load average ${loadAverage()})`);
    }

    // (b) An unchanged organization: one listing request (a 304), no CSV request.
    if (parts.has("incremental")) {
      const copy = await database("exportsvc_bench_sync_copy");
      try {
        let listings = 0;
        let pages = 0;
        class Counting extends ExportApiClient {
          override listing(etag?: string) {
            listings++;
            return super.listing(etag);
          }
          override openPage(...args: Parameters<ExportApiClient["openPage"]>) {
            pages++;
            return super.openPage(...args);
          }
        }
        const sync = async () => {
          const client = new Counting({ baseUrl, apiKey });
          const target = openTarget(copy.url);
          await target.open({ writer: true });
          try {
            return await new SyncEngine(client, target, { only: undefined }).runOnce();
          } finally {
            await target.close();
            await client.close();
          }
        };
        await sync();
        listings = 0;
        pages = 0;
        const started = Date.now();
        const again = await sync();
        log(`\nincremental sync of the unchanged organization: listing ${again.listing}, ${listings} listing request(s), ${pages} CSV request(s), ${Date.now() - started} ms`);
      } finally {
        await copy.drop();
      }
    }

    // (c) Memory with wide rows: customers whose description holds a 300 KB JSON reference.
    if (parts.has("memory")) {
      const t = Date.now();
      await pool.query(
        `INSERT INTO customers (organization_id, id, name, description, last_modified)
         SELECT $1, gen_random_uuid(), 'Customer ' || i, '{"ref":"' || repeat('x', $3::int - 11) || '"}', timestamptz '2024-01-01' + i * interval '1 second'
           FROM generate_series(1, $2::int) i`,
        [organizationId, wideRows, wideBytes],
      );
      log(`\ngenerated ${wideRows} customers with a ${wideBytes}-byte field in ${Date.now() - t} ms`);
      for (const { kind, label } of TARGETS) {
        // Then every wide row changed: the incremental pass upserts them, pages as wide as the backfill's.
        const touchAll = async () => {
          await pool.query("UPDATE customers SET name = name || ' (changed)', last_modified = clock_timestamp() WHERE organization_id = $1", [organizationId]);
          await new Promise((r) => setTimeout(r, 2000)); // past the visibility horizon
        };
        const wide = await measureSync(`sync resources_customers (wide) → ${label}`, baseUrl, apiKey, "resources_customers", kind, true, {}, touchAll);
        log(line(wide));
        log(
          `memory (${kind}): peak RSS growth ${wide.peakRssGrowthMb!.toFixed(0)} MB while streaming ${wide.pages} pages, ${(wide.bytes / 1e6).toFixed(0)} MB in all ` +
            `(${((wide.bytes / Math.max(1, wide.pages)) / 1e6).toFixed(0)} MB per page of up to 5000 rows with ${wideBytes}-byte fields); ` +
            `incremental pass upserting ${wide.againRows} of them: ${wide.againPeakRssGrowthMb!.toFixed(0)} MB`,
        );
      }
    }
  });
  if (ratios && TARGETS.length === ALL_TARGETS.length && SELECTED_KINDS.length === KINDS.length) for (const l of ratioLines(ratios)) log(l);
}

const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

runAsScript(module, main, "bench:sync");
