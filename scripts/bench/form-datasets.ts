/**
 * `npx tsx scripts/bench/form-datasets.ts`: what materializing form datasets costs.
 *
 * On a generated form (every common field type, a grid with a nested grid: 3 datasets, 5 rendered
 * rows per submission) with many submissions:
 *   (a) `buildDataset`: rebuild of every dataset of the form: render every cell to its CSV text,
 *       write the tables, build their two indexes each, ANALYZE the sort columns, swap the registry;
 *       (a) with the default parallelism (tables rendered at once on helper connections), (a1) one
 *       table at a time on one connection;
 *   (b) baseline: per dataset, a plain `CREATE TABLE AS SELECT` from `submissions` of the same rows
 *       (grid arrays expanded the same way) with the same number of columns, each the raw stored
 *       value (`values ->> '<field id>'`, the typed envelope column, the array ordinality) without
 *       any conversion, renumbering, site join or index: what extracting the cells costs at all;
 *   (b') the same baseline plus the two indexes per table the rebuild creates (same DDL);
 *   (c) commit-to-visibility lag with `startMaintenanceLoop` running: single-row updates committed
 *       on a fixed schedule (BENCH_LAG_RATE per second, several connections so a slow commit does
 *       not lower the rate), each with a unique marker; a poller reads the dataset table every
 *       few ms; lag = marker readable − commit acknowledged.
 * Build and baseline alternate BENCH_REPEAT times; medians are compared.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL     database to use as is (migrated here); default: a fresh database
 *                          exportsvc_bench_forms on DATABASE_URL's server, dropped at the end unless BENCH_KEEP=1
 *   DATABASE_URL           server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_FORM_SUBMISSIONS submissions to generate (default 100000)
 *   BENCH_REPEAT           rebuild/baseline rounds (default 3)
 *   BENCH_LAG_RATE         updates per second during the lag measurement (default 200)
 *   BENCH_LAG_SECONDS      duration of the lag measurement (default 10)
 *   BENCH_REBUILD_PARALLELISM  tables rendered at once in (a) (default: the library default, 3);
 *                          (a1) always renders one at a time
 *   BENCH_STORED_CURSORS   0: build without signing each row's stored `_cursor` (the schema service
 *                          signs them when it has CURSOR_KEYS, as it does by default here)
 */
import { randomBytes, randomUUID } from "node:crypto";
import { CursorCodec, CursorKeyring } from "@exportsvc/datasets";
import { Client } from "pg";
import { createPool, inTransaction, migrate } from "@exportsvc/db";
import { Pool } from "pg";
import { provisionDatabase } from "./database";
import { benchField as f, benchScalarFields, envInt as num, log, median, msSince as ms } from "./helpers";
import { buildDataset, createIndexesSql, DEFAULT_REBUILD_PARALLELISM, startMaintenanceLoop, type DatasetPlan, type FormField } from "@exportsvc/form-datasets";
import { runAsScript } from "../lib/run-script";


async function main(): Promise<void> {
  const submissions = num("BENCH_FORM_SUBMISSIONS", 100_000);
  const repeats = num("BENCH_REPEAT", 3);
  const lagRate = num("BENCH_LAG_RATE", 200);
  const lagSeconds = num("BENCH_LAG_SECONDS", 10);
  const parallelism = num("BENCH_REBUILD_PARALLELISM", DEFAULT_REBUILD_PARALLELISM);
  if (lagRate * lagSeconds > submissions) throw new Error("BENCH_LAG_RATE * BENCH_LAG_SECONDS must not exceed BENCH_FORM_SUBMISSIONS (one submission per update)");
  const db = await provisionDatabase("exportsvc_bench_forms", { benchDatabaseUrl: true });
  const pool = createPool({ connectionString: db.url, max: 6 });
  pool.on("error", () => undefined);
  try {
    await migrate(pool);
    const orgId = randomUUID();
    const siteId = randomUUID();
    const formId = randomUUID();
    await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'Bench')", [orgId]);
    await pool.query("INSERT INTO sites (organization_id, id, name, time_zone, path) VALUES ($1, $2, 'Plant', 'Europe/Berlin', $3)", [orgId, siteId, siteId]);

    const inner = f("number", "reading");
    const nested = f("grid", "readings", { fields: [inner] });
    const gridText = f("text", "item");
    const grid = f("grid", "items", { fields: [gridText, nested] });
    const fields = [
      ...benchScalarFields({ requiresVerification: true }),
      f("attachment", "files"),
      grid,
    ];
    const [operator, notes, temperature, passed, productionDate, sampledAt, line, allergens, approver, files] = fields;
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench Form', 'B')", [orgId, formId]);
    await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())", [
      orgId,
      formId,
      JSON.stringify(fields),
    ]);

    let t = process.hrtime.bigint();
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", verifications, last_modified)
       SELECT $1, gen_random_uuid(), $2, 'B-' || i, $3, 'Completed', ts - interval '1 hour', ts,
              jsonb_build_object(
                $4::text, 'operator ' || i, $5::text, repeat('note ', 8), $6::text, (i % 1000) / 10.0, $7::text, i % 2 = 0,
                $8::text, '2024-03-01', $9::text, '2024-03-01T10:00:00Z', $10::text, 'l' || (1 + i % 2),
                $11::text, jsonb_build_array('milk', 'soy'), $12::text, jsonb_build_object('name', 'Boss', 'date', '2024-03-02T00:00:00Z'),
                $13::text, jsonb_build_array('a.pdf', 'b.pdf'),
                $14::text, jsonb_build_array(
                  jsonb_build_object($15::text, 'row a', $16::text, jsonb_build_array(jsonb_build_object($17::text, 1), jsonb_build_object($17::text, 2))),
                  jsonb_build_object($15::text, 'row b', $16::text, '[]'::jsonb))),
              jsonb_build_object($6::text, '2024-03-01T09:00:00Z'),
              ts
         FROM generate_series(1, $18::int) AS i, LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 second' AS ts) x`,
      [orgId, formId, siteId, operator.id, notes.id, temperature.id, passed.id, productionDate.id, sampledAt.id, line.id, allergens.id, approver.id, files.id, grid.id, gridText.id, nested.id, inner.id, submissions],
    );
    log(`generated ${submissions} submissions (${(2 * submissions).toLocaleString()} grid rows, ${(2 * submissions).toLocaleString()} nested rows) in ${ms(t).toFixed(0)} ms`);
    await pool.query("DELETE FROM form_dataset_changes");
    await pool.query("VACUUM ANALYZE submissions");

    const { serialMs, buildMs, baselineMs, baselineIndexedMs, datasets, renderedRows } = await measureRebuild(pool, orgId, formId, repeats, parallelism);
    const runs = (xs: number[]) => `${xs.map((x) => x.toFixed(0)).join(" / ")} ms  → median ${median(xs).toFixed(0)} ms`;
    log(`(a) buildDataset, ${datasets} datasets, ${renderedRows.toLocaleString()} rows, parallelism ${parallelism} (tables rendered at once): ${runs(buildMs)}` +
        `, ${((submissions / median(buildMs)) * 1000).toFixed(0)} submissions/s`);
    log(`(a1) the same, one table at a time (parallelism 1): ${runs(serialMs)}`);
    log(`(b) CREATE TABLE AS baseline, same rows and column count: ${runs(baselineMs)}`);
    log(`    rebuild / baseline = ${(median(buildMs) / median(baselineMs)).toFixed(2)}x; one table at a time: ${(median(serialMs) / median(baselineMs)).toFixed(2)}x (medians of ${repeats} runs)`);
    log(`(b') the same baseline plus the rebuild's two indexes per table: median ${median(baselineIndexedMs).toFixed(0)} ms` +
        `  (rebuild / this = ${(median(buildMs) / median(baselineIndexedMs)).toFixed(2)}x; one table at a time: ${(median(serialMs) / median(baselineIndexedMs)).toFixed(2)}x)`);

    const lag = await measureLag(pool, db.url, orgId, operator.id, lagRate, lagSeconds);
    log(
      `(c) commit-to-visibility lag, ${lag.writes} updates at ${lag.achievedRate.toFixed(0)} writes/s (target ${lagRate}/s) over ${lag.seconds.toFixed(1)} s: ` +
        `p50 ${lag.p(0.5)} ms, p95 ${lag.p(0.95)} ms, p99 ${lag.p(0.99)} ms, max ${lag.p(1)} ms`,
    );
  } finally {
    await pool.end();
    await db.drop();
  }
}

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * The baseline of one dataset: the same rows (grid arrays expanded per submission, in order) and the
 * same number of columns as the materialized table, each cell the raw stored value, no conversion.
 */
function baselineSql(plan: DatasetPlan, table: string): string {
  const depth = plan.gridPath.length;
  const joins = plan.gridPath
    .map((g, i) => `CROSS JOIN LATERAL jsonb_array_elements(${i === 0 ? 's."values"' : `e${i}.value`} -> ${lit(g.id)}) WITH ORDINALITY AS e${i + 1}(value, ord)`)
    .join("\n ");
  const source = depth === 0 ? 's."values"' : `e${depth}.value`;
  const envelope: Record<string, string> = { site_name: "s.site_id", site_path: "s.site_id" };
  const raw = plan.columns.map((c, i) => {
    const r = c.render;
    const expr =
      r.kind === "envelope"
        ? envelope[r.name] ?? `s.${r.name.replace(/_local$/, "")}`
        : r.kind === "rowIndex"
          ? `e${depth}.ord`
          : r.kind === "ancestorRowIndex"
            ? `e${r.depth}.ord`
            : r.kind === "verification"
              ? `s.verifications ->> ${lit(r.fieldId)}`
              : `${source} ->> ${lit(r.field.id)}`;
    return `${expr} AS c${i + 1}`;
  });
  return `CREATE TABLE ${table} AS SELECT s.organization_id, s.id, s.last_modified, s.completed_at${depth > 0 ? `, e${depth}.ord AS row_index` : ""},
         ${raw.join(", ")}
    FROM submissions s ${joins}
   WHERE s.organization_id = $1 AND s.form_id = $2`;
}

/** As the schema service builds with CURSOR_KEYS: rows store their signed `_cursor` (docs/cursor.md). */
const cursorCodec =
  process.env.BENCH_STORED_CURSORS === "0" ? undefined : new CursorCodec({ keyring: CursorKeyring.parse(`1:${randomBytes(24).toString("base64")}`) });

async function measureRebuild(pool: Pool, orgId: string, formId: string, repeats: number, parallelism: number) {
  const serialMs: number[] = [];
  const buildMs: number[] = [];
  const baselineMs: number[] = [];
  const baselineIndexedMs: number[] = [];
  let datasets = 0;
  let renderedRows = 0;
  for (let round = 0; round < repeats; round++) {
    let t = process.hrtime.bigint();
    const serial = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, parallelism: 1, cursorCodec });
    serialMs.push(ms(t));
    if (serial.status !== "built") throw new Error(`build ${serial.status}: ${serial.error}`);
    t = process.hrtime.bigint();
    const built = await buildDataset(pool, orgId, formId, { dropGraceMs: 0, parallelism, cursorCodec });
    buildMs.push(ms(t));
    if (built.status !== "built") throw new Error(`build ${built.status}: ${built.error}`);
    datasets = built.datasets.length;

    const plans = await pool.query<{ plan: DatasetPlan; table_name: string }>(
      `SELECT t.plan, t.table_name FROM dataset_registry r JOIN form_ds.dataset_tables t ON t.organization_id = r.organization_id AND t.table_name = r.table_name
        WHERE r.organization_id = $1 AND r.state = 'ready'`,
      [orgId],
    );
    renderedRows = 0;
    for (const p of plans.rows) renderedRows += Number((await pool.query(`SELECT count(*) AS n FROM ${p.table_name}`)).rows[0].n);
    const client = await pool.connect();
    try {
      t = process.hrtime.bigint();
      await inTransaction(client, async () => {
        for (const [i, p] of plans.rows.entries()) await client.query(baselineSql(p.plan, `bench_baseline_${i}`), [orgId, formId]);
        baselineMs.push(ms(t));
        for (const [i, p] of plans.rows.entries()) for (const sql of createIndexesSql(`bench_baseline_${i}`, p.plan)) await client.query(sql);
      });
      baselineIndexedMs.push(ms(t));
      for (const i of plans.rows.keys()) await client.query(`DROP TABLE bench_baseline_${i}`);
    } finally {
      client.release();
    }
  }
  return { serialMs, buildMs, baselineMs, baselineIndexedMs, datasets, renderedRows };
}

/**
 * Updates committed at `rate` per second for `seconds` while the maintenance loop runs on its own
 * pool; a poller reads the submission dataset for the markers still pending.
 */
async function measureLag(pool: Pool, url: string, orgId: string, operatorFieldId: string, rate: number, seconds: number) {
  const entry = await pool.query<{ table_name: string; columns: { key: string; source: { column: string } }[] }>(
    "SELECT table_name, columns FROM dataset_registry WHERE organization_id = $1 AND key = 'bench_form'",
    [orgId],
  );
  const table = entry.rows[0].table_name;
  const operatorColumn = entry.rows[0].columns.find((c) => c.key === "operator")!.source.column;
  const total = rate * seconds;
  const ids = (await pool.query<{ id: string }>("SELECT id::text AS id FROM submissions WHERE organization_id = $1 ORDER BY random() LIMIT $2", [orgId, total])).rows.map((r) => r.id);
  await pool.query("DELETE FROM form_dataset_changes");

  const loopPool = createPool({ connectionString: url, max: 4 });
  const writers = new Pool({ connectionString: url, max: 8 });
  const poller = new Client({ connectionString: url });
  // Idle clients are terminated when the bench database is dropped at the end: not an error here.
  loopPool.on("error", () => undefined);
  writers.on("error", () => undefined);
  poller.on("error", () => undefined);
  await poller.connect();
  const loop = startMaintenanceLoop(loopPool, { pollIntervalMs: 1000, cursorCodec, onError: (e) => log(`loop error: ${String(e)}`) });
  await new Promise((r) => setTimeout(r, 300));

  /** Committed, not yet seen: submission id -> [marker, commit time]. */
  const pending = new Map<string, [string, bigint]>();
  const lags: number[] = [];
  let writesDone = false;
  let writeError: unknown = null;
  const polling = (async () => {
    while (!writesDone || pending.size > 0) {
      if (pending.size > 0) {
        const seen = await poller.query<{ id: string; v: string | null }>(`SELECT id::text AS id, ${operatorColumn} AS v FROM ${table} WHERE organization_id = $1 AND id = ANY($2::uuid[])`, [
          orgId,
          [...pending.keys()],
        ]);
        const now = process.hrtime.bigint();
        for (const row of seen.rows) {
          const p = pending.get(row.id);
          if (p && row.v === p[0]) {
            lags.push(Number(now - p[1]) / 1e6);
            pending.delete(row.id);
          }
        }
        for (const [, [, committed]] of pending) if (Number(now - committed) / 1e6 > 30_000) throw new Error("change not visible after 30 s");
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  })();

  const start = process.hrtime.bigint();
  const inFlight: Promise<void>[] = [];
  let lastCommit = start;
  try {
    for (let i = 0; i < total; i++) {
      const due = (i * 1000) / rate - ms(start);
      if (due > 0) await new Promise((r) => setTimeout(r, due));
      const id = ids[i];
      const marker = `lag ${i}`;
      inFlight.push(
        writers
          .query(`UPDATE submissions SET "values" = jsonb_set("values", ARRAY[$2::text], to_jsonb($3::text)), last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $4`, [
            orgId,
            operatorFieldId,
            marker,
            id,
          ])
          .then(() => {
            lastCommit = process.hrtime.bigint();
            pending.set(id, [marker, lastCommit]);
          })
          .catch((err) => {
            writeError = err;
          }),
      );
    }
    await Promise.all(inFlight);
    if (writeError) throw writeError;
  } finally {
    writesDone = true;
    await polling.finally(async () => {
      await loop.stop();
      await poller.end();
      await writers.end();
      await loopPool.end();
    });
  }
  lags.sort((a, b) => a - b);
  return {
    writes: total,
    seconds: Number(lastCommit - start) / 1e9,
    achievedRate: total / (Number(lastCommit - start) / 1e9),
    p: (q: number) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))].toFixed(1),
  };
}

runAsScript(module, main, "bench:forms");
