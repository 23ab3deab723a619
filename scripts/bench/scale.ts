/**
 * `npm run bench:scale`: how the service's costs grow (issue 15 item 6), in one run, through the
 * public HTTP API of the four services started here as processes on a fresh database:
 *   rows         full export of resources_suppliers (cursor loop, limit 5000) at N rows: rows/s
 *   datasets     GET /v1/datasets of one organization with N datasets (form datasets registered
 *                directly), median of BENCH_SCALE_SAMPLES requests, and the 304 with If-None-Match
 *   tenants      N organizations (each with a small dataset); listing and one CSV page of a sample
 *                of them: median latency
 *   concurrency  N organizations exporting their own suppliers at once: aggregate rows/s
 * Writes the growth table (markdown) to stdout and the chart to docs/bench-scale.png (vega-lite →
 * vega SVG → @resvg/resvg-js PNG; BENCH_SCALE_PNG to change the path, "" for none) and the figures
 * as JSON to BENCH_SCALE_JSON when set.
 *
 * The default steps finish in minutes on a shared 2-core machine; BENCH_SCALE_BIG=1 runs the full
 * ranges (rows to 1M, datasets to 10k, tenants to 1000, concurrency to 10).
 *
 * The datasets dimension also times a 200 right after a change (one dataset's counter moved, so the
 * listing version moved and nothing cached is reused: the listing is built) and /health in the same run.
 * After its steps it measures the 304, the authenticated 400 and /health in the steady state:
 * BENCH_SCALE_STEADY requests of each (default 3000, 0 for none) in five interleaved rounds, the
 * first round's first 50 of each dropped; medians, printed as a second table (not plotted) with the
 * gateway process's CPU time per request of each kind (/proc/<pid>/stat around each of the last four
 * rounds, every request counted; Linux only), which tells the gateway's own cost from waiting on the stores.
 *
 * Environment: DATABASE_URL (server of the fresh database exportsvc_bench_scale_<pid>, dropped at
 * the end unless BENCH_KEEP=1), REDIS_URL, BENCH_SCALE_BIG, BENCH_SCALE_SAMPLES (default 5),
 * BENCH_SCALE_ROWS / _DATASETS / _TENANTS / _CONCURRENCY (comma-separated steps, override the defaults),
 * BENCH_SCALE_ONLY (comma-separated dimensions to run, e.g. `datasets` for the listing alone),
 * BENCH_SCALE_STEADY.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import type { Pool } from "pg";
import { provisionDatabase } from "./database";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { shapeFingerprint, type ColumnSpec } from "@exportsvc/datasets";
import { createPool, migrate } from "@exportsvc/db";
import { startStack, type RunningStack } from "../lib/stack";
import { freePort } from "../lib/ports";
import { processCpuMs } from "../lib/proc-stat";
import { BENCH_DATASET, generateSuppliers, SUPPLIER_TABLES_VACUUM } from "./dataset";
import { measureHttp } from "./measure";
import { renderVegaLitePng } from "./plot";
import { runAsScript } from "../lib/run-script";

const big = process.env.BENCH_SCALE_BIG === "1";
const steps = (name: string, small: number[], full: number[]) => {
  const v = process.env[name];
  if (!v) return big ? full : small;
  return v.split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must list positive integers`);
    return n;
  });
};
const log = (m: string) => process.stderr.write(`${m}\n`);
const DIMENSIONS = ["rows", "datasets", "tenants", "concurrency"] as const;
const only = (process.env.BENCH_SCALE_ONLY ?? "").split(",").map((d) => d.trim()).filter(Boolean);
for (const d of only) if (!(DIMENSIONS as readonly string[]).includes(d)) throw new Error(`BENCH_SCALE_ONLY: unknown dimension '${d}' (${DIMENSIONS.join(", ")})`);
const runs = (dimension: (typeof DIMENSIONS)[number]) => only.length === 0 || only.includes(dimension);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

interface Point {
  dimension: "rows" | "datasets" | "tenants" | "concurrency";
  n: number;
  metric: string;
  value: number;
}

async function main(): Promise<void> {
  const rowSteps = runs("rows") ? steps("BENCH_SCALE_ROWS", [10_000, 30_000, 100_000], [10_000, 100_000, 300_000, 1_000_000]) : [];
  const datasetSteps = runs("datasets") ? steps("BENCH_SCALE_DATASETS", [10, 100, 1000], [10, 100, 1000, 10_000]) : [];
  const tenantSteps = runs("tenants") ? steps("BENCH_SCALE_TENANTS", [1, 10, 100], [1, 10, 100, 1000]) : [];
  const concurrencySteps = runs("concurrency") ? steps("BENCH_SCALE_CONCURRENCY", [1, 2, 5], [1, 2, 5, 10]) : [];
  const samples = Number(process.env.BENCH_SCALE_SAMPLES || 5);
  const steadyRequests = Number(process.env.BENCH_SCALE_STEADY ?? 3000);
  if (!Number.isInteger(steadyRequests) || steadyRequests < 0) throw new Error("BENCH_SCALE_STEADY must be a whole number of requests");
  const concurrencyRows = big ? 50_000 : 10_000;

  const db = await provisionDatabase(`exportsvc_bench_scale_${process.pid}`);
  const databaseUrl = db.url;
  const pool = createPool({ connectionString: databaseUrl, max: 6, applicationName: "bench-scale" });
  const keyHashSecret = randomBytes(24).toString("base64url");
  let stack: RunningStack | undefined;
  const points: Point[] = [];
  const steady: { measure: string; ms: number; gatewayCpuMs: number }[] = [];
  const record = (p: Point) => {
    points.push(p);
    log(`${p.dimension} ${p.n}: ${p.metric} ${p.value.toFixed(p.value < 100 ? 2 : 0)}`);
  };
  try {
    await migrate(pool);
    const [gateway, catalog, exportPort, schema] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    stack = await startStack({
      databaseUrl,
      redisUrl: process.env.REDIS_URL || undefined,
      keyHashSecret,
      cursorKeys: `1:${randomBytes(24).toString("base64")}`,
      ports: { gateway, catalog, export: exportPort, schema },
      logLevel: "warn",
      env: { RATE_LIMIT_PER_WINDOW: "1000000" },
    });
    const baseUrl = stack.baseUrl;
    const keyFor = async (org: string) => {
      const key = generateApiKey();
      await pool.query("INSERT INTO api_keys (id, organization_id, secret_hash, description) VALUES ($1, $2, $3, 'bench')", [
        key.id,
        org,
        hashApiKeySecret(key.secret, keyHashSecret),
      ]);
      return key.secret;
    };
    const get = (path: string, apiKey: string, headers: Record<string, string> = {}) =>
      fetch(new URL(path, baseUrl), { headers: { authorization: `Bearer ${apiKey}`, "accept-encoding": "identity", ...headers } });
    const timedListing = async (apiKey: string) => {
      const times: number[] = [];
      const times304: number[] = [];
      let etag: string | null = null;
      let bytes = 0;
      for (let i = 0; i < samples + 1; i++) {
        const t = process.hrtime.bigint();
        const res = await get("/v1/datasets", apiKey);
        if (res.status !== 200) throw new Error(`listing: HTTP ${res.status} ${await res.text()}`);
        bytes = (await res.arrayBuffer()).byteLength;
        if (i > 0) times.push(ms(t)); // the first request warms caches and triggers the registry sync
        etag = res.headers.get("etag");
      }
      if (etag) {
        for (let i = 0; i < samples; i++) {
          const t = process.hrtime.bigint();
          const res = await get("/v1/datasets", apiKey, { "if-none-match": etag });
          await res.arrayBuffer();
          if (res.status === 304) times304.push(ms(t));
        }
      }
      return { ms200: median(times), ms304: times304.length ? median(times304) : NaN, bytes };
    };
    /** A 200 right after one dataset's change counter moved: the listing version moved, so it is built. */
    const timedListingAfterChange = async (org: string, apiKey: string) => {
      const times: number[] = [];
      for (let i = 0; i < samples; i++) {
        await pool.query(
          `INSERT INTO dataset_changes (organization_id, dataset, version, settles_at) VALUES ($1, 'form_1', 1, now() - interval '1 second')
           ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1`,
          [org],
        );
        const t = process.hrtime.bigint();
        const res = await get("/v1/datasets", apiKey);
        if (res.status !== 200) throw new Error(`listing: HTTP ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        times.push(ms(t));
      }
      return median(times);
    };
    /** A request the gateway refuses after authentication and rate limiting (a bad `limit`): what a 304 costs before the catalog. */
    const timedGuardOnly = async (apiKey: string) => {
      const times: number[] = [];
      for (let i = 0; i < samples + 1; i++) {
        const t = process.hrtime.bigint();
        const res = await get("/v1/datasets/resources_suppliers/csv?limit=x", apiKey);
        await res.arrayBuffer();
        if (res.status !== 400) throw new Error(`guard-only request: HTTP ${res.status}`);
        if (i > 0) times.push(ms(t));
      }
      return median(times);
    };
    const timedHealth = async () => {
      const times: number[] = [];
      for (let i = 0; i < samples + 1; i++) {
        const t = process.hrtime.bigint();
        const res = await fetch(new URL("/health", baseUrl));
        await res.arrayBuffer();
        if (i > 0) times.push(ms(t));
      }
      return median(times);
    };

    // rows
    const rowsOrg = randomUUID();
    if (rowSteps.length) await generateSuppliers(pool, rowsOrg, 1, () => undefined);
    const rowsKey = rowSteps.length ? await keyFor(rowsOrg) : "";
    for (const [i, n] of rowSteps.entries()) {
      await generateSuppliers(pool, rowsOrg, n, () => undefined);
      await pool.query("VACUUM ANALYZE suppliers");
      if (i === 0) await measureHttp(baseUrl, rowsKey, BENCH_DATASET, 5000); // warm-up: first connections, JIT
      const m = await measureHttp(baseUrl, rowsKey, BENCH_DATASET, 5000);
      record({ dimension: "rows", n, metric: "rows/s (full HTTP export)", value: m.rows / m.seconds });
    }

    // datasets per organization
    const dsOrg = randomUUID();
    await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'Datasets org')", [dsOrg]);
    await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true)", [dsOrg]);
    const dsKey = await keyFor(dsOrg);
    let registered = 0;
    for (const n of datasetSteps) {
      await registerFormDatasets(pool, dsOrg, registered, n);
      registered = Math.max(registered, n);
      const t = await timedListing(dsKey);
      record({ dimension: "datasets", n, metric: "listing ms (200)", value: t.ms200 });
      record({ dimension: "datasets", n, metric: "listing ms (200 after a change)", value: await timedListingAfterChange(dsOrg, dsKey) });
      if (!Number.isNaN(t.ms304)) record({ dimension: "datasets", n, metric: "listing ms (304)", value: t.ms304 });
      log(`datasets ${n}: listing body ${(t.bytes / 1e6).toFixed(1)} MB`);
      record({ dimension: "datasets", n, metric: "/health ms (same run)", value: await timedHealth() });
      record({ dimension: "datasets", n, metric: "authenticated 400 ms (auth + rate limit only)", value: await timedGuardOnly(dsKey) });
    }
    if (datasetSteps.length && steadyRequests > 0) {
      const etag = (await get("/v1/datasets", dsKey)).headers.get("etag") ?? "";
      // /health first: the table's ratios are to it.
      const kinds = [
        { measure: "/health", status: 200, send: () => fetch(new URL("/health", baseUrl)) },
        { measure: "authenticated 400 (auth + rate limit only)", status: 400, send: () => get("/v1/datasets/resources_suppliers/csv?limit=x", dsKey) },
        { measure: "listing 304", status: 304, send: () => get("/v1/datasets", dsKey, { "if-none-match": etag }) },
      ].map((kind) => ({ ...kind, times: [] as number[], gatewayCpuMs: 0 }));
      const gatewayPid = stack.processes.gateway.pid;
      // NaN where /proc cannot tell: the table then shows no CPU figures.
      const gatewayCpu = () => processCpuMs(gatewayPid) ?? NaN;
      const perRound = Math.max(1, Math.floor(steadyRequests / 5));
      for (let round = 0; round < 5; round++) {
        for (const kind of kinds) {
          const cpuBefore = gatewayCpu();
          for (let i = 0; i < perRound; i++) {
            const t = process.hrtime.bigint();
            const res = await kind.send();
            await res.arrayBuffer();
            if (res.status !== kind.status) throw new Error(`steady ${kind.measure}: HTTP ${res.status}`);
            if (round > 0 || i >= 50) kind.times.push(ms(t));
          }
          // The first round warms the JIT: its CPU is not counted.
          if (round > 0) kind.gatewayCpuMs += gatewayCpu() - cpuBefore;
        }
      }
      for (const kind of kinds) {
        steady.push({ measure: kind.measure, ms: median(kind.times), gatewayCpuMs: kind.gatewayCpuMs / (4 * perRound) });
      }
      const health = steady[0].ms;
      for (const s of steady) log(`steady state, ${datasetSteps.at(-1)} datasets: ${s.measure} ${s.ms.toFixed(3)} ms (${(s.ms / health).toFixed(2)}× /health)`);
    }

    // tenants
    let tenants: string[] = [];
    for (const n of tenantSteps) {
      const more = n - tenants.length;
      if (more > 0) {
        const ids = Array.from({ length: more }, () => randomUUID());
        await pool.query("INSERT INTO organizations (id, name) SELECT id, 'Tenant' FROM unnest($1::uuid[]) id", [ids]);
        await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) SELECT id, true FROM unnest($1::uuid[]) id", [ids]);
        // One VACUUM after all of them: per organization it re-reads the big tables each time.
        for (const id of ids) await generateSuppliers(pool, id, 200, () => undefined, { vacuum: false });
        await pool.query(SUPPLIER_TABLES_VACUUM);
        tenants = [...tenants, ...ids];
      }
      const sample = tenants.filter((_, i) => i % Math.max(1, Math.floor(tenants.length / 5)) === 0).slice(0, 5);
      const listing: number[] = [];
      const page: number[] = [];
      for (const org of sample) {
        const key = await keyFor(org);
        listing.push((await timedListing(key)).ms200);
        const times: number[] = [];
        for (let i = 0; i < samples; i++) {
          const t = process.hrtime.bigint();
          const res = await get(`/v1/datasets/${BENCH_DATASET}/csv?limit=100`, key);
          if (res.status !== 200) throw new Error(`page: HTTP ${res.status}`);
          await res.arrayBuffer();
          times.push(ms(t));
        }
        page.push(median(times));
      }
      record({ dimension: "tenants", n, metric: "listing ms (200)", value: median(listing) });
      record({ dimension: "tenants", n, metric: "CSV page ms (100 rows)", value: median(page) });
    }

    // concurrency: N organizations export at once
    const concurrentOrgs: { org: string; key: string }[] = [];
    for (const n of concurrencySteps) {
      while (concurrentOrgs.length < n) {
        const org = randomUUID();
        await generateSuppliers(pool, org, concurrencyRows, () => undefined);
        concurrentOrgs.push({ org, key: await keyFor(org) });
      }
      await pool.query("VACUUM ANALYZE suppliers");
      const t = process.hrtime.bigint();
      const results = await Promise.all(concurrentOrgs.slice(0, n).map((o) => measureHttp(baseUrl, o.key, BENCH_DATASET, 5000)));
      const seconds = ms(t) / 1000;
      const rows = results.reduce((a, r) => a + r.rows, 0);
      record({ dimension: "concurrency", n, metric: "aggregate rows/s", value: rows / seconds });
      record({ dimension: "concurrency", n, metric: "rows/s per organization", value: median(results.map((r) => r.rows / r.seconds)) });
    }
  } finally {
    await stack?.stop().catch(() => undefined);
    await pool.end();
    await db.drop();
  }

  process.stdout.write(growthTable(points));
  if (steady.length) {
    const cpu = (s: (typeof steady)[number]) =>
      Number.isNaN(s.gatewayCpuMs) ? "– | –" : `${s.gatewayCpuMs.toFixed(3)} | ${(s.gatewayCpuMs / steady[0].gatewayCpuMs).toFixed(2)}`;
    const lines = ["", "| steady state (interleaved) | ms | × /health | gateway CPU ms per request | × /health |", "|---|---:|---:|---:|---:|"];
    for (const s of steady) lines.push(`| ${s.measure} | ${s.ms.toFixed(3)} | ${(s.ms / steady[0].ms).toFixed(2)} | ${cpu(s)} |`);
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  if (process.env.BENCH_SCALE_JSON) (await import("node:fs")).writeFileSync(process.env.BENCH_SCALE_JSON, JSON.stringify(points, null, 2));
  // A partial run (BENCH_SCALE_ONLY) draws no chart unless asked: docs/bench-scale.png shows all four.
  const png = process.env.BENCH_SCALE_PNG ?? (only.length ? "" : join(__dirname, "..", "..", "docs", "bench-scale.png"));
  if (png) {
    await renderVegaLitePng(chartSpec(points), png);
    log(`chart: ${png}`);
  }
}

/** N form datasets (submission datasets with three columns) registered as the materializer would. */
async function registerFormDatasets(pool: Pool, org: string, from: number, to: number): Promise<void> {
  if (to <= from) return;
  const columns: ColumnSpec[] = [
    { key: "id", dataType: "uuid", label: "ID", source: { kind: "table", column: "id" } },
    { key: "temperature", dataType: "number", label: "Temperature", source: { kind: "table", column: "c1" } },
    { key: "last_modified", dataType: "dateTime", label: "Last Modified", source: { kind: "table", column: "last_modified" } },
  ];
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, columns, shape_fingerprint, state, table_name)
     SELECT $1, 'form_' || g, 'submission', gen_random_uuid()::text, 'Form ' || g, $2::jsonb, $3, 'ready', 'form_ds.t_bench_' || g
       FROM generate_series($4::int + 1, $5::int) g`,
    [org, JSON.stringify(columns), shapeFingerprint(columns), from, to],
  );
}

function growthTable(points: Point[]): string {
  const lines = ["| dimension | N | measure | value |", "|---|---:|---|---:|"];
  for (const p of points) lines.push(`| ${p.dimension} | ${p.n.toLocaleString("en-US")} | ${p.metric} | ${p.value >= 100 ? Math.round(p.value).toLocaleString("en-US") : p.value.toFixed(1)} |`);
  return `${lines.join("\n")}\n`;
}

function chartSpec(points: Point[]): Record<string, unknown> {
  const panel = (dimension: Point["dimension"], title: string, yTitle: string) => ({
    title,
    width: 420,
    height: 240,
    transform: [{ filter: { field: "dimension", equal: dimension } }],
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "n", type: "quantitative", scale: { type: "log" }, title: "N" },
      y: { field: "value", type: "quantitative", title: yTitle },
      color: { field: "metric", type: "nominal", legend: { orient: "bottom", title: null, labelLimit: 400, direction: "vertical" } },
    },
    resolve: { scale: { color: "independent" } },
  });
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    data: { values: points },
    title: "bench:scale — growth (this commit)",
    columns: 2,
    concat: [
      panel("rows", "Rows in the dataset", "rows/s"),
      panel("datasets", "Datasets per organization", "ms"),
      panel("tenants", "Tenants", "ms"),
      panel("concurrency", "Organizations exporting at once", "rows/s"),
    ],
    resolve: { scale: { color: "independent" } },
    config: { font: "sans-serif" },
  };
}

runAsScript(module, main, "bench:scale");
