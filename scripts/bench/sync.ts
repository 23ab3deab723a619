/**
 * `npm run bench:sync`: what the reference consumer (packages/sync-client) costs next to a plain
 * full HTTP export of the same data, in the same run.
 *
 *   (a) initial backfill of 200 000 resources_suppliers rows and of a 500 000-row grid dataset
 *       (100 000 submissions with 5 rows each) into PostgreSQL and into SQLite: rows/s and the ratio
 *       to a plain full export of the same dataset through the HTTP API (bytes counted, discarded);
 *   (b) an incremental sync of the unchanged organization: requests made (target: one listing, no CSV);
 *   (c) memory: RSS of this process sampled while syncing pages of 5000 rows whose reference field
 *       holds 300 KB (resources_customers.description), peak growth against the page size.
 *
 * Environment (all optional):
 *   DATABASE_URL             server for the bench databases (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_SUPPLIERS          supplier rows (default 200000)
 *   BENCH_FORM_SUBMISSIONS   submissions, 5 grid rows each (default 100000)
 *   BENCH_WIDE_ROWS          rows with a wide field for (c) (default 5001: one full page of 5000 and one more)
 *   BENCH_WIDE_BYTES         size of the wide field (default 300000)
 *   BENCH_RUNS               runs per measurement, best one reported (default 1)
 *   BENCH_SYNC_PARTS         comma-separated parts to run: backfill, incremental, memory (default: all)
 *   BENCH_KEEP=1             keep the source database (exportsvc_bench_sync)
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CursorCodec, CursorKeyring } from "@exportsvc/datasets";
import { createPool, migrate } from "@exportsvc/db";
import { buildDataset } from "@exportsvc/form-datasets";
import { ExportApiClient, SyncEngine, openTarget } from "../../packages/sync-client/src";
import { provisionDatabase } from "./database";
import { generateSuppliers } from "./dataset";
import { envInt as num, log, secondsSince } from "./helpers";
import { measureHttp, type Measurement } from "./measure";
import { newBenchCursorKeys, startBenchStack } from "./stack";
import { linkOnDemandPackage } from "../tools/on-demand";
import { runAsScript } from "../lib/run-script";

/** A fresh database on DATABASE_URL's server; drop() always drops it (the source database is kept with BENCH_KEEP=1 below). */
const database = (name: string) => provisionDatabase(name, { keep: false });

/** A form with a grid: `submissions` submissions of 5 grid rows, built as the schema service builds it. */
async function generateForm(pool: ReturnType<typeof createPool>, orgId: string, submissions: number, cursorKeys: string) {
  const siteId = randomUUID();
  const formId = randomUUID();
  const f = (type: string, key: string, extra: Record<string, unknown> = {}) => ({ id: randomUUID(), key, label: key, type, ...extra });
  const item = f("text", "item");
  const qty = f("number", "qty");
  const ok = f("yesNo", "ok");
  const grid = f("grid", "items", { fields: [item, qty, ok] });
  const fields = [f("text", "operator"), f("number", "temperature"), grid];
  await pool.query("INSERT INTO sites (organization_id, id, name, time_zone, path) VALUES ($1, $2, 'Plant', 'Europe/Berlin', $3)", [orgId, siteId, siteId]);
  await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench Form', 'B')", [orgId, formId]);
  await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())", [orgId, formId, JSON.stringify(fields)]);
  const rows = Array.from({ length: 5 }, (_, r) => `jsonb_build_object($6::text, 'item ${r + 1} of ' || i, $7::text, i % 97 + ${r}, $8::text, (i + ${r}) % 2 = 0)`).join(", ");
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", last_modified)
     SELECT $1, gen_random_uuid(), $2, 'B-' || i, $3, 'Completed', ts - interval '1 hour', ts,
            jsonb_build_object($4::text, 'operator ' || i, $5::text, (i % 1000) / 10.0, $9::text, jsonb_build_array(${rows})), ts
       FROM generate_series(1, $10::int) AS i, LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 second' AS ts) x`,
    [orgId, formId, siteId, fields[0].id, fields[1].id, item.id, qty.id, ok.id, grid.id, submissions],
  );
  await pool.query("DELETE FROM form_dataset_changes");
  // As the schema service builds it: the rows store their signed cursors (docs/cursor.md).
  const built = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, cursorCodec: new CursorCodec({ keyring: CursorKeyring.parse(cursorKeys) }) });
  if (built.status !== "built") throw new Error(`form build ${built.status}: ${built.error}`);
  await pool.query("VACUUM ANALYZE");
}

class Skip extends Error {}

interface SyncMeasurement extends Measurement {
  peakRssGrowthMb?: number;
}

async function measureSync(name: string, baseUrl: string, apiKey: string, dataset: string, kind: "postgres" | "sqlite", sampleRss = false): Promise<SyncMeasurement> {
  if (kind === "sqlite") linkOnDemandPackage("better-sqlite3"); // not in npm install: installed on first use
  const dir = kind === "sqlite" ? mkdtempSync(join(tmpdir(), "bench-sync-")) : undefined;
  const pg = kind === "postgres" ? await database("exportsvc_bench_sync_copy") : undefined;
  const url = pg ? pg.url : `sqlite:${join(dir!, "copy.db")}`;
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
    if (summary.failed.length) throw new Error(`${name}: ${JSON.stringify(summary.failed)}`);
    return { name, rows: summary.rows, bytes, pages, seconds, peakRssGrowthMb: sampleRss ? (peak - before) / 1e6 : undefined };
  } finally {
    if (sampler) clearInterval(sampler);
    await target.close();
    await client.close();
    await pg?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

function line(m: Measurement, reference?: Measurement) {
  const rps = m.rows / m.seconds;
  const ratio = reference ? `  ${(rps / (reference.rows / reference.seconds)).toFixed(2)}x plain export` : "";
  return `${m.name.padEnd(46)} ${String(m.rows).padStart(8)} rows ${m.seconds.toFixed(2).padStart(7)} s ${Math.round(rps).toLocaleString("en").padStart(9)} rows/s ${(m.bytes / 1e6 / m.seconds).toFixed(1).padStart(6)} MB/s${ratio}`;
}

async function main() {
  const suppliers = num("BENCH_SUPPLIERS", 200_000);
  const submissions = num("BENCH_FORM_SUBMISSIONS", 100_000);
  const wideRows = num("BENCH_WIDE_ROWS", 5001);
  const wideBytes = num("BENCH_WIDE_BYTES", 300_000);
  const runs = num("BENCH_RUNS", 1);
  const parts = new Set((process.env.BENCH_SYNC_PARTS || "backfill,incremental,memory").split(",").map((p) => p.trim()));
  const source = await database("exportsvc_bench_sync");
  const pool = createPool({ connectionString: source.url, max: 4 });
  const organizationId = "0b0b0b0b-0000-4000-8000-00000000be01";
  try {
    await migrate(pool);
    await generateSuppliers(pool, organizationId, suppliers, log);
    const t = Date.now();
    const cursorKeys = newBenchCursorKeys();
    await generateForm(pool, organizationId, submissions, cursorKeys);
    log(`generated ${submissions} submissions (${submissions * 5} grid rows) and built their datasets in ${Date.now() - t} ms`);
    const { stack, apiKey } = await startBenchStack(pool, source.url, organizationId, cursorKeys);
    try {
      const listing = await new ExportApiClient({ baseUrl: stack.baseUrl, apiKey }).listing();
      if (listing.notModified) throw new Error("unexpected 304");
      const grid = listing.datasets.find((d) => d.parentDataset)!.key;
      const best = async (run: () => Promise<Measurement>) => {
        let winner: Measurement | undefined;
        for (let i = 0; i < runs; i++) {
          const m = await run();
          if (!winner || m.seconds < winner.seconds) winner = m;
        }
        return winner!;
      };
      if (parts.has("backfill")) log(`\nbest of ${runs}, pages of 5000:`);
      for (const dataset of parts.has("backfill") ? ["resources_suppliers", grid] : []) {
        const plain = await best(async () => ({ ...(await measureHttp(stack.baseUrl, apiKey, dataset, 5000)), name: `plain HTTP export ${dataset}` }));
        const pg = await best(() => measureSync(`sync ${dataset} → PostgreSQL`, stack.baseUrl, apiKey, dataset, "postgres"));
        const lite = await best(() => measureSync(`sync ${dataset} → SQLite`, stack.baseUrl, apiKey, dataset, "sqlite"));
        if (pg.rows !== plain.rows || lite.rows !== plain.rows) throw new Error(`row counts differ: export ${plain.rows}, PostgreSQL ${pg.rows}, SQLite ${lite.rows}`);
        log(line(plain));
        log(line(pg, plain) + "  (target >= 0.60x)");
        log(line(lite, plain));
      }

      // (b) An unchanged organization: one listing request (a 304), no CSV request.
      const copy = await database("exportsvc_bench_sync_copy");
      try {
        if (!parts.has("incremental")) throw new Skip();
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
          const client = new Counting({ baseUrl: stack.baseUrl, apiKey });
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
      } catch (err) {
        if (!(err instanceof Skip)) throw err;
      } finally {
        await copy.drop();
      }

      // (c) Memory with wide rows: customers whose description holds a 300 KB JSON reference.
      if (!parts.has("memory")) return;
      const t = Date.now();
      await pool.query(
        `INSERT INTO customers (organization_id, id, name, description, last_modified)
         SELECT $1, gen_random_uuid(), 'Customer ' || i, '{"ref":"' || repeat('x', $3::int - 11) || '"}', timestamptz '2024-01-01' + i * interval '1 second'
           FROM generate_series(1, $2::int) i`,
        [organizationId, wideRows, wideBytes],
      );
      log(`\ngenerated ${wideRows} customers with a ${wideBytes}-byte field in ${Date.now() - t} ms`);
      for (const kind of ["postgres", "sqlite"] as const) {
        const wide = await measureSync(`sync resources_customers (wide) → ${kind === "postgres" ? "PostgreSQL" : "SQLite"}`, stack.baseUrl, apiKey, "resources_customers", kind, true);
        log(line(wide));
        log(
          `memory (${kind}): peak RSS growth ${wide.peakRssGrowthMb!.toFixed(0)} MB while streaming ${wide.pages} pages, ${(wide.bytes / 1e6).toFixed(0)} MB in all ` +
            `(${((wide.bytes / Math.max(1, wide.pages)) / 1e6).toFixed(0)} MB per page of up to 5000 rows with ${wideBytes}-byte fields)`,
        );
      }
    } finally {
      await stack.stop();
    }
  } finally {
    await pool.end();
    if (process.env.BENCH_KEEP !== "1") await source.drop();
  }
}

runAsScript(module, main, "bench:sync");
