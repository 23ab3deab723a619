/**
 * `npm run bench`: how close the export path gets to PostgreSQL's own COPY speed.
 *
 * In one run, on a generated dataset (resources_suppliers with custom attributes and product lists):
 *   (a) raw keyset pages of the service's own page query, `COPY (...) TO STDOUT (FORMAT csv)`,
 *       straight from PostgreSQL, bytes discarded (the speed limit), plus the same without the
 *       cursor MAC (what signing costs per row);
 *   (b) a full export through the export service's gRPC stream (in-process server);
 *   (c) a full export through the public HTTP API: the four services started here as processes on the
 *       bench database (or a running stack given by BENCH_BASE_URL and BENCH_API_KEY), plain and gzip.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL  database to use as is (migrated here); default: a fresh database
 *                       exportsvc_bench on DATABASE_URL's server, dropped at the end unless BENCH_KEEP=1
 *   DATABASE_URL        server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_ROWS          rows to generate (default 200000)
 *   BENCH_LIMIT         page size (default 5000)
 *   BENCH_RUNS          runs per measurement, best one reported (default 2)
 *   BENCH_ORGANIZATION_ID organization of the generated data (default fixed uuid)
 *   BENCH_BASE_URL, BENCH_API_KEY, BENCH_DATASET  the HTTP measurement (key of that organization)
 *   BENCH_STACK=0       skip the HTTP measurement (no stack is started)
 */
import { randomBytes } from "node:crypto";
import { createPool, migrate } from "@exportsvc/db";
import { CursorCodec, CursorKeyring, type PageDataset } from "@exportsvc/datasets";
import { exportConfigSchema, start } from "@exportsvc/export";
import { BENCH_DATASET, generateSuppliers } from "./bench/dataset";
import { startBenchStack } from "./bench/stack";
import { provisionDatabase } from "./bench/database";
import { envInt as num, log } from "./bench/helpers";
import { measureGrpc, measureHttp, measureRawCopy, payloadPosition, UnsignedCursorCodec, type Measurement } from "./bench/measure";
import { runAsScript } from "./lib/run-script";

async function best(runs: number, measure: () => Promise<Measurement>): Promise<Measurement> {
  let winner: Measurement | undefined;
  for (let i = 0; i < runs; i++) {
    const m = await measure();
    if (!winner || m.seconds < winner.seconds) winner = m;
  }
  return winner!;
}

function report(m: Measurement, reference?: Measurement): string {
  const rowsPerSecond = m.rows / m.seconds;
  const mbPerSecond = m.bytes / 1e6 / m.seconds;
  const ratio = reference ? `  ${(rowsPerSecond / (reference.rows / reference.seconds)).toFixed(2)}x raw` : "";
  return `${m.name.padEnd(34)} ${String(m.rows).padStart(8)} rows ${String(m.pages).padStart(4)} pages ${m.seconds.toFixed(2).padStart(7)} s ${Math.round(rowsPerSecond).toLocaleString("en").padStart(9)} rows/s ${mbPerSecond.toFixed(1).padStart(7)} MB/s${ratio}`;
}

async function main() {
  const rows = num("BENCH_ROWS", 200_000);
  const limit = num("BENCH_LIMIT", 5000);
  const runs = num("BENCH_RUNS", 2);
  const organizationId = process.env.BENCH_ORGANIZATION_ID || "0b0b0b0b-0000-4000-8000-00000000be00";
  const db = await provisionDatabase("exportsvc_bench", { benchDatabaseUrl: true, reuse: true });
  const pool = createPool({ connectionString: db.url, max: 4, applicationName: "exportsvc-bench" });
  const cursorKeys = `1:${randomBytes(24).toString("base64")}`;
  const service = await start(
    exportConfigSchema.parse({ DATABASE_URL: db.url, GRPC_HOST: "127.0.0.1", GRPC_PORT: "0", SCHEMA_ADDRESS: "", CURSOR_KEYS: cursorKeys, LOG_LEVEL: "warn" }),
  );
  try {
    await migrate(pool);
    const columns = await generateSuppliers(pool, organizationId, rows, log);
    const dataset: PageDataset = { key: BENCH_DATASET, kind: "resource", sourceRef: "suppliers", columns };
    const keyring = CursorKeyring.parse(cursorKeys);
    const signed = new CursorCodec({ keyring });
    const unsigned = new UnsignedCursorCodec({ keyring });

    log(`\n${rows} rows, ${columns.length} columns + _cursor, pages of ${limit}, best of ${runs} (runs interleaved after a warm-up pass):`);
    const rawRun = () => measureRawCopy("raw COPY (same query)", pool, dataset, organizationId, signed, limit, payloadPosition);
    const unsignedRun = () => measureRawCopy("raw COPY without cursor MAC", pool, dataset, organizationId, unsigned, limit, payloadPosition);
    const grpcRun = () => measureGrpc(`127.0.0.1:${service.port}`, organizationId, BENCH_DATASET, limit);

    // The HTTP API: a running stack (BENCH_BASE_URL + BENCH_API_KEY), else the four services started
    // here as processes on the bench database (BENCH_STACK=0 skips it).
    let http: { baseUrl: string; apiKey: string; stop(): Promise<void> } | undefined;
    if (process.env.BENCH_BASE_URL && process.env.BENCH_API_KEY) {
      http = { baseUrl: process.env.BENCH_BASE_URL, apiKey: process.env.BENCH_API_KEY, stop: async () => undefined };
    } else if (process.env.BENCH_STACK !== "0") {
      const started = await startBenchStack(pool, db.url, organizationId);
      http = { baseUrl: started.stack.baseUrl, apiKey: started.apiKey, stop: () => started.stack.stop() };
    }
    try {
      const runners = [rawRun, unsignedRun, grpcRun];
      if (http) {
        const target = http;
        runners.push(() => measureHttp(target.baseUrl, target.apiKey, process.env.BENCH_DATASET || BENCH_DATASET, limit));
        runners.push(() => measureHttp(target.baseUrl, target.apiKey, process.env.BENCH_DATASET || BENCH_DATASET, limit, true));
      }
      // Untimed: the first pass after generation pays for cold caches and hint-bit writes.
      await rawRun();
      const results: Measurement[][] = runners.map(() => []);
      for (let i = 0; i < runs; i++) {
        for (const [j, run] of runners.entries()) results[j].push(await run());
      }
      const fastest = (ms: Measurement[]) => ms.reduce((a, b) => (b.seconds < a.seconds ? b : a));
      const [raw, rawUnsigned, grpc, httpPlain, httpGzip] = results.map(fastest);
      log(report(raw));
      log(report(rawUnsigned, raw));
      log(report(grpc, raw));
      if (httpPlain) log(report(httpPlain, raw));
      if (httpGzip) log(report(httpGzip, raw));
      for (const m of [grpc, httpPlain, httpGzip]) {
        if (m && m.rows !== raw.rows) throw new Error(`row counts differ: raw ${raw.rows}, ${m.name} ${m.rows}`);
      }

      const macMicrosPerRow = ((raw.seconds - rawUnsigned.seconds) / raw.rows) * 1e6;
      log(`cursor MAC cost: ${macMicrosPerRow.toFixed(2)} µs/row (${(((raw.seconds - rawUnsigned.seconds) / raw.seconds) * 100).toFixed(1)}% of raw time)`);
      const ratio = (m: Measurement) => (m.rows / m.seconds / (raw.rows / raw.seconds)).toFixed(2);
      log(`\nexport service (gRPC) / raw COPY: ${ratio(grpc)}x`);
      if (httpPlain) log(`full export through the HTTP API / raw COPY: ${ratio(httpPlain)}x (target >= 0.80x)`);
      else log("HTTP API: skipped (BENCH_STACK=0)");
    } finally {
      await http?.stop();
    }
  } finally {
    await service.stop();
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main, "bench");
