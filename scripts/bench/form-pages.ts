/**
 * `npm run bench:form-pages`: how close a form dataset's full HTTP export gets to a raw keyset COPY
 * loop over its materialized table (issue 15, "Form pages at the table's speed").
 *
 * On a generated form (flat fields: one submission dataset of ~25 columns) with BENCH_FORM_SUBMISSIONS
 * submissions, built by `buildDataset`, with the four services running as processes on the bench
 * database (gateway -> export over gRPC, schema's maintenance loop running), in three scenarios:
 *   clean:    right after the build, change log empty and vacuumed;
 *   imported: right after an import of every submission of the form (one UPDATE of all of them, new
 *             stamps), rendered by a rebuild, its change-log rows consumed (deleted) and left as dead
 *             rows (autovacuum is off for form_dataset_changes during the bench; no VACUUM);
 *   backlog:  beside BENCH_FORM_SUBMISSIONS live pending changes of another form of the organization
 *             (its form lock is held, so the maintenance loop leaves them pending).
 * Each scenario times, after a VACUUM ANALYZE of `submissions` and the materialized table (the change
 * log stays as the scenario left it) and one untimed pass of each path (caches, hint bits, the
 * services' JIT), interleaved BENCH_RUNS times (medians reported, with each round's ratio):
 *   (a) raw: `COPY (SELECT <table columns> FROM <materialized table> WHERE (last_modified, id) > (...)
 *       ORDER BY last_modified, id LIMIT n) TO STDOUT (FORMAT csv)` page after page, bytes discarded;
 *   (b) the service's own page query (buildPageQuery: live site names, signed cursor) the same way;
 *   (c) the same pages straight from the export service's gRPC stream (no gateway), and
 *   (c') the full export through the public HTTP API (`Accept-Encoding: identity`), pages of n;
 *   (d) the page horizon alone (`pageHorizon` for the form, median per call).
 * Each scenario also logs a page's first and last byte of (a) and (c') (PageClock of ./measure, medians).
 *
 * Environment (all optional):
 *   DATABASE_URL           server for the fresh database (dropped at the end unless BENCH_KEEP=1)
 *   BENCH_DATABASE_NAME    its name (default exportsvc_bench_form_pages; another name lets two runs share a server)
 *   BENCH_FORM_SUBMISSIONS submissions (default 1000000; e.g. 100000 for a quick run)
 *   BENCH_LIMIT            page size (default 5000)
 *   BENCH_RUNS             interleaved rounds per scenario (default 3)
 *   BENCH_SCENARIOS        comma-separated subset of clean,imported,backlog (default all three)
 *   BENCH_STORED_CURSORS   0: build the form without stored cursors (every page signs its rows), to
 *                          compare with the default (the schema service's builds store them)
 */
import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { to as copyTo } from "pg-copy-streams";
import { parse } from "csv-parse/sync";
import { commandCompleted, migrate } from "@exportsvc/db";
import { CursorCodec, CursorKeyring, loadRegistryEntry, PAGE_SESSION_SETTINGS_SQL, pageHorizon, type PageDataset } from "@exportsvc/datasets";
import { buildDataset, formLockKeys, type FormField } from "@exportsvc/form-datasets";
import { openBenchDatabase } from "./database";
import { benchField as f, benchScalarFields, envInt, log, median, msSince } from "./helpers";
import { measureGrpc, measureHttp, measureRawCopy, PageClock, pageTimesText, payloadPosition, type Measurement } from "./measure";
import { newBenchCursorKeys, startBenchStack } from "./stack";
import { cpuNoted, stackPids } from "./cpu";
import { runAsScript } from "../lib/run-script";


export const SCENARIOS = ["clean", "imported", "backlog"] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** The form's generated values (one jsonb per submission), shared by the generation and the import. */
function valuesSql(fields: FormField[], round: string): string {
  const [operator, notes, temperature, passed, productionDate, sampledAt, line, allergens, approver, batch, weight, shift] = fields;
  const v = (field: FormField, expr: string) => `'${field.id}', ${expr}`;
  return `jsonb_build_object(
    ${v(operator, `'operator ' || (i % 97) || ${round}`)}, ${v(notes, "repeat('note ', 6)")}, ${v(temperature, "(i % 1000) / 10.0")},
    ${v(passed, "i % 2 = 0")}, ${v(productionDate, "'2024-03-01'")}, ${v(sampledAt, "'2024-03-01T10:00:00Z'")},
    ${v(line, "'l' || (1 + i % 2)")}, ${v(allergens, "jsonb_build_array('milk', 'soy')")},
    ${v(approver, "jsonb_build_object('name', 'Boss', 'date', '2024-03-02T00:00:00Z')")},
    ${v(batch, "'B' || lpad((i % 10000)::text, 5, '0')")}, ${v(weight, "(i % 500) * 1.5")}, ${v(shift, "'s' || (1 + i % 3)")})`;
}

/** The bench form of form-pages and storage: generated, built, and what its scenarios need. */
export interface BenchForm {
  orgId: string;
  formId: string;
  otherFormId: string;
  fields: FormField[];
  submissions: number;
  datasetKey: string;
  /** The codec its rows' cursors were stored with (undefined: built without stored cursors). */
  cursorCodec?: CursorCodec;
}

/**
 * Generates `submissions` submissions of a flat form (and an empty second form, for the backlog
 * scenario) in organization `orgId` (created when missing), and builds its datasets as the schema
 * service does, with `cursorKeys` (the stack's CURSOR_KEYS) storing each row's cursor.
 */
export async function createBenchForm(pool: Pool, orgId: string, submissions: number, cursorKeys: string, storedCursors = true): Promise<BenchForm> {
  const siteId = randomUUID();
  const formId = randomUUID();
  const otherFormId = randomUUID();
  // "Right after an import, no VACUUM": the dead change-log rows must stay for the measurement.
  await pool.query("ALTER TABLE form_dataset_changes SET (autovacuum_enabled = false)");
  await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'Bench') ON CONFLICT DO NOTHING", [orgId]);
  await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true) ON CONFLICT DO NOTHING", [orgId]);
  await pool.query("INSERT INTO sites (organization_id, id, name, time_zone, path) VALUES ($1, $2, 'Plant', 'Europe/Berlin', $3)", [orgId, siteId, siteId]);
  const fields = [
    ...benchScalarFields(),
    f("text", "batch"),
    f("number", "weight"),
    f("text", "shift"),
  ];
  for (const [id, name] of [[formId, "Bench Form"], [otherFormId, "Other Form"]]) {
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, $3, 'B')", [orgId, id, name]);
    await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())", [orgId, id, JSON.stringify(fields)]);
  }
  let t = process.hrtime.bigint();
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", last_modified)
     SELECT $1, gen_random_uuid(), $2, 'B-' || i, $3, 'Completed', ts - interval '1 hour', ts, ${valuesSql(fields, "''")}, ts
       FROM generate_series(1, $4::int) AS i, LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 second' AS ts) x`,
    [orgId, formId, siteId, submissions],
  );
  log(`generated ${submissions.toLocaleString("en")} submissions in ${msSince(t).toFixed(0)} ms`);
  await pool.query("DELETE FROM form_dataset_changes");
  await pool.query("VACUUM ANALYZE submissions, form_dataset_changes");
  t = process.hrtime.bigint();
  // Built as the schema service builds it (with the stack's CURSOR_KEYS, rows store their cursors).
  const cursorCodec = storedCursors ? new CursorCodec({ keyring: CursorKeyring.parse(cursorKeys) }) : undefined;
  const built = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, cursorCodec });
  if (built.status !== "built") throw new Error(`build ${built.status}: ${built.error}`);
  log(`built ${built.datasets.length} dataset(s) in ${msSince(t).toFixed(0)} ms`);
  const datasetKey = (await pool.query<{ key: string }>("SELECT key FROM dataset_registry WHERE organization_id = $1 AND kind = 'submission' AND source_ref = $2", [orgId, formId])).rows[0].key;
  return { orgId, formId, otherFormId, fields, submissions, datasetKey, cursorCodec };
}

/**
 * Puts the database in `scenario`'s state (see the header) and settles the tables; returns what
 * ends it (the backlog's held lock), to call after the scenario is measured.
 */
export async function prepareScenario(scenario: Scenario, pool: Pool, databaseUrl: string, form: BenchForm): Promise<() => Promise<void>> {
  const { orgId, formId, otherFormId, fields, submissions, cursorCodec } = form;
  let release = async () => undefined;
  if (scenario === "clean") {
    await pool.query("VACUUM ANALYZE form_dataset_changes");
  } else if (scenario === "imported") {
    const t = process.hrtime.bigint();
    // One import transaction rewrites every submission (explicit stamps a year later, kept
    // distinct so pages stay pages); the rebuild renders them, the log rows become dead rows.
    await pool.query(
      `UPDATE submissions s SET "values" = ${valuesSql(fields, "' (imported)'")}, last_modified = s.last_modified + interval '365 days'
         FROM (SELECT id, row_number() OVER (ORDER BY last_modified, id) AS i FROM submissions WHERE organization_id = $1 AND form_id = $2) n
        WHERE s.organization_id = $1 AND s.id = n.id`,
      [orgId, formId],
    );
    const rebuilt = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, cursorCodec });
    if (rebuilt.status !== "built") throw new Error(`rebuild ${rebuilt.status}: ${rebuilt.error}`);
    // What the rebuild rendered but did not consume (it remembers a bounded number) is current
    // already: consumed here, as the loop would, only faster.
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1 AND form_id = $2", [orgId, formId]);
    await waitUntilAllVisible(pool, orgId, formId);
    const dead = await deadChangeRows(pool);
    log(`import of ${submissions.toLocaleString("en")} submissions rendered and consumed in ${msSince(t).toFixed(0)} ms; form_dataset_changes: ${dead.live} live, ${dead.dead} dead rows`);
  } else {
    await pool.query("VACUUM ANALYZE form_dataset_changes");
    // The other form's changes stay pending: its form lock is held (the loop defers them).
    const holder = new Client({ connectionString: databaseUrl, application_name: "exportsvc-bench" });
    await holder.connect();
    const [k1, k2] = formLockKeys(orgId, otherFormId);
    await holder.query("SELECT pg_advisory_lock($1, $2)", [k1, k2]);
    release = async () => {
      await holder.query("SELECT pg_advisory_unlock($1, $2)", [k1, k2]);
      await holder.end();
    };
    const t = process.hrtime.bigint();
    await pool.query(
      `INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id, source_last_modified)
       SELECT $1, 'submission', $2, gen_random_uuid(), now() - interval '1 day' + i * interval '1 microsecond' FROM generate_series(1, $3::int) i`,
      [orgId, otherFormId, submissions],
    );
    await pool.query("ANALYZE form_dataset_changes");
    const dead = await deadChangeRows(pool);
    log(`${submissions.toLocaleString("en")} pending changes of another form logged in ${msSince(t).toFixed(0)} ms; form_dataset_changes: ${dead.live} live, ${dead.dead} dead rows`);
  }
  try {
    await settleTables(pool, orgId, formId);
  } catch (err) {
    await release();
    throw err;
  }
  return release;
}

async function main(): Promise<void> {
  const submissions = envInt("BENCH_FORM_SUBMISSIONS", 1_000_000);
  const limit = envInt("BENCH_LIMIT", 5000);
  const runs = envInt("BENCH_RUNS", 3);
  const storedCursors = process.env.BENCH_STORED_CURSORS !== "0";
  const scenarios = (process.env.BENCH_SCENARIOS || SCENARIOS.join(",")).split(",").map((s) => s.trim()) as Scenario[];
  for (const s of scenarios) if (!SCENARIOS.includes(s)) throw new Error(`BENCH_SCENARIOS: unknown scenario '${s}' (known: ${SCENARIOS.join(", ")})`);

  const { db, pool, close } = await openBenchDatabase("exportsvc_bench_form_pages");
  let stack: Awaited<ReturnType<typeof startBenchStack>> | undefined;
  try {
    await migrate(pool);
    const cursorKeys = newBenchCursorKeys();
    const form = await createBenchForm(pool, randomUUID(), submissions, cursorKeys, storedCursors);
    stack = await startBenchStack(pool, db.url, form.orgId, cursorKeys);
    const codec = new CursorCodec({ keyring: CursorKeyring.parse(stack.cursorKeys) });
    log(`dataset ${form.datasetKey}, pages of ${limit}, ${runs} interleaved rounds per scenario (medians; ratio = rows/s over raw rows/s), cursors ${storedCursors ? "stored with the rows" : "signed on every page"}\n`);

    for (const scenario of scenarios) await measureInScenario(scenario, pool, db.url, form, stack, codec, limit, runs);
  } finally {
    await stack?.stack.stop();
    await close();
  }
}

/** The form's submission dataset's materialized table (schema-qualified). */
async function materializedTable(pool: Pool, orgId: string, formId: string): Promise<string> {
  const { rows } = await pool.query<{ table_name: string }>("SELECT table_name FROM dataset_registry WHERE organization_id = $1 AND kind = 'submission' AND source_ref = $2", [orgId, formId]);
  return rows[0].table_name;
}

/**
 * VACUUM ANALYZE of the source table and the form's materialized table before a scenario is timed:
 * an import leaves a million dead submissions and a build a million new rows, and autovacuum would
 * otherwise work on them during the timed rounds (one run's raw loop fell from 288k to 158k rows/s).
 * Then a CHECKPOINT: the import's and the vacuum's dirty pages are written now, not by the
 * checkpointer spread over the timed rounds (an imported scenario's HTTP export fell to 0.50-0.55×
 * in some runs and not in others). It needs a superuser or pg_checkpoint; without, it is skipped.
 * The change log is left as each scenario set it: its dead or pending rows are what is measured.
 */
async function settleTables(pool: Pool, orgId: string, formId: string): Promise<void> {
  await pool.query(`VACUUM ANALYZE submissions, ${await materializedTable(pool, orgId, formId)}`);
  await pool.query("CHECKPOINT").catch(() => undefined);
}

/** Until every materialized row is below the page horizon (the maintenance loop raises a held floor within a poll). */
async function waitUntilAllVisible(pool: Pool, orgId: string, formId: string): Promise<void> {
  const table = await materializedTable(pool, orgId, formId);
  const newest = BigInt(
    (await pool.query<{ t: string }>(`SELECT (extract(epoch FROM max(last_modified)) * 1000000)::bigint::text AS t FROM ${table}`)).rows[0].t,
  );
  const deadline = Date.now() + 120_000;
  while ((await pageHorizon(pool, orgId, formId)).visibleBeforeMicros <= newest) {
    if (Date.now() > deadline) throw new Error("rows still held back by the page horizon after 2 minutes");
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function deadChangeRows(pool: Pool): Promise<{ live: string; dead: string }> {
  await pool.query("SELECT pg_stat_force_next_flush()").catch(() => undefined);
  const { rows } = await pool.query<{ live: string; dead: string }>(
    "SELECT n_live_tup::text AS live, n_dead_tup::text AS dead FROM pg_stat_user_tables WHERE relname = 'form_dataset_changes'",
  );
  return rows[0] ?? { live: "?", dead: "?" };
}

/**
 * (a) The raw keyset loop over the materialized table: its columns as stored, in the dataset's
 * order; the next page starts after the last line's last_modified and id.
 */
export async function measureRawTable(pool: Pool, dataset: PageDataset, organizationId: string, limit: number): Promise<Measurement> {
  const tableColumns = dataset.columns.flatMap((c) => (c.source.kind === "table" ? [c.source.column] : []));
  const lastModifiedAt = tableColumns.indexOf("last_modified");
  const idAt = tableColumns.indexOf("id");
  if (lastModifiedAt < 0 || idAt < 0) throw new Error("the materialized table has no last_modified or id column");
  const client = await pool.connect();
  await client.query(PAGE_SESSION_SETTINGS_SQL);
  const started = process.hrtime.bigint();
  const clock = new PageClock();
  let rows = 0;
  let bytes = 0;
  let pages = 0;
  let after = "";
  try {
    for (;;) {
      const sql = `SELECT ${tableColumns.map((c) => `t.${c}`).join(", ")} FROM ${dataset.tableName} t
        WHERE t.organization_id = '${organizationId}'${after} ORDER BY t.last_modified, t.id LIMIT ${limit}`;
      clock.ask();
      const stream = client.query(copyTo(`COPY (${sql}) TO STDOUT (FORMAT csv)`));
      const completed = commandCompleted(stream);
      let tail: Buffer = Buffer.alloc(0);
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        clock.chunk();
        bytes += chunk.length;
        tail = chunk.length >= 16384 ? chunk.subarray(-16384) : Buffer.concat([tail, chunk]).subarray(-16384);
      }
      await completed;
      clock.ended();
      pages++;
      rows += stream.rowCount;
      if (stream.rowCount < limit) break;
      const lines = tail.toString("utf8").split("\n");
      const [last] = parse(lines[lines.length - 2]) as string[][];
      const [lastModified, id] = [last[lastModifiedAt], last[idAt]];
      if (!/^[0-9: .+-]+$/.test(lastModified) || !/^[0-9a-f-]{36}$/.test(id)) throw new Error(`unexpected position ${lastModified} ${id}`);
      after = ` AND (t.last_modified, t.id) > ('${lastModified}'::timestamptz, '${id}'::uuid)`;
    }
  } finally {
    client.release();
  }
  return { name: "raw keyset COPY over the table", rows, bytes, pages, seconds: Number(process.hrtime.bigint() - started) / 1e9, page: clock.times() };
}

/** A scenario's medians, rows/s, by path, and the most the HTTP path's ratio over the raw one could have been at its CPU cost (cpuCeiling). */
export type ScenarioRates = Record<"raw" | "page" | "grpc" | "http" | "httpCeiling", number>;

/** Puts the database in `scenario`'s state, measures the form's dataset in it, and ends the state however the measurement ends. */
export async function measureInScenario(
  scenario: Scenario,
  pool: Pool,
  databaseUrl: string,
  form: BenchForm,
  started: Awaited<ReturnType<typeof startBenchStack>>,
  codec: CursorCodec,
  limit: number,
  runs: number,
): Promise<ScenarioRates> {
  const release = await prepareScenario(scenario, pool, databaseUrl, form);
  try {
    return await measureScenario(scenario, pool, started, form.orgId, form.formId, form.datasetKey, codec, limit, runs);
  } finally {
    await release();
  }
}

export async function measureScenario(
  scenario: Scenario,
  pool: Pool,
  started: Awaited<ReturnType<typeof startBenchStack>>,
  orgId: string,
  formId: string,
  datasetKey: string,
  codec: CursorCodec,
  limit: number,
  runs: number,
): Promise<ScenarioRates> {
  const dataset = (await loadRegistryEntry(pool, orgId, datasetKey))!;
  const raw = () => measureRawTable(pool, dataset, orgId, limit);
  const page = () => measureRawCopy("service page query, raw COPY", pool, dataset, orgId, codec, limit, payloadPosition);
  const httpCpu = cpuNoted(stackPids(started.stack), () => measureHttp(started.stack.baseUrl, started.apiKey, datasetKey, limit));
  const http = httpCpu.run;
  const grpc = () => measureGrpc(started.exportAddress, orgId, datasetKey, limit);
  const horizonMs = async () => {
    const xs: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t = process.hrtime.bigint();
      await pageHorizon(pool, orgId, formId);
      xs.push(msSince(t));
    }
    return median(xs);
  };
  // Untimed warm-ups, one of each path: the table's pages in cache and their hint bits set for the raw
  // loop, and the services' code optimized by V8 for theirs. Without the second, the first round
  // timed the services' JIT warm-up (0.35x against 0.57x and 0.51x in the rounds after it).
  await raw();
  await grpc();
  await http();
  httpCpu.forget();
  const results: Record<"raw" | "page" | "grpc" | "http", Measurement[]> = { raw: [], page: [], grpc: [], http: [] };
  const horizons: number[] = [];
  for (let i = 0; i < runs; i++) {
    results.raw.push(await raw());
    results.page.push(await page());
    results.grpc.push(await grpc());
    results.http.push(await http());
    horizons.push(await horizonMs());
  }
  const rate = (m: Measurement) => m.rows / m.seconds;
  for (const m of [...results.page, ...results.grpc, ...results.http]) if (m.rows !== results.raw[0].rows) throw new Error(`row counts differ: raw ${results.raw[0].rows}, ${m.name} ${m.rows}`);
  const perRound = (k: "page" | "grpc" | "http") => results[k].map((m, i) => (rate(m) / rate(results.raw[i])).toFixed(2)).join(" / ");
  const med = (k: keyof typeof results) => median(results[k].map(rate));
  log(`[${scenario}] ${results.raw[0].rows.toLocaleString("en")} rows, ${results.raw[0].pages} pages, ${(results.http[0].bytes / 1e6).toFixed(0)} MB over HTTP`);
  log(`  raw keyset COPY over the table  ${Math.round(med("raw")).toLocaleString("en").padStart(9)} rows/s`);
  log(`  service page query, raw COPY    ${Math.round(med("page")).toLocaleString("en").padStart(9)} rows/s  ratio ${(med("page") / med("raw")).toFixed(2)}x (rounds ${perRound("page")})`);
  log(`  export service over gRPC        ${Math.round(med("grpc")).toLocaleString("en").padStart(9)} rows/s  ratio ${(med("grpc") / med("raw")).toFixed(2)}x (rounds ${perRound("grpc")})`);
  const { ceiling: httpCeiling, note: ceiling } = httpCpu.ceiling(results.http, results.raw.map(rate));
  log(`  full HTTP export                ${Math.round(med("http")).toLocaleString("en").padStart(9)} rows/s  ratio ${(med("http") / med("raw")).toFixed(2)}x (rounds ${perRound("http")})${ceiling}`);
  log(`  pageHorizon per call (median)   ${median(horizons).toFixed(2)} ms`);
  log(`  a page, first byte / last byte (medians): raw ${pageTimesText(results.raw)}, HTTP ${pageTimesText(results.http)}\n`);
  return { raw: med("raw"), page: med("page"), grpc: med("grpc"), http: med("http"), httpCeiling };
}

runAsScript(module, main, "bench:form-pages");
