/**
 * `npm run bench:rewrites`: what precise rewrites (migration 120's log, the rewrite feed) cost the
 * source's writers, and what they save consumers. Two parts (BENCH_PARTS, default both):
 *
 * renames: a site shown by BENCH_RENAME_ROWS submissions of a form that has BENCH_RENAME_OTHER_ROWS
 *   more at another site (built as the schema service builds it: its submission dataset's rows show
 *   the site's name live; grids show no site), and a product listed by BENCH_RENAME_SUPPLIERS of
 *   four times as many suppliers (resources_suppliers):
 *   (a) the writer: one rename (UPDATE of the name, committed) with the log trigger, and as before
 *       the feed (046's organization counter bump instead), alternating, BENCH_RENAME_REPEAT rounds,
 *       medians, ratio with/without;
 *   (b) the time from the rename's commit to its first rewritten rows served (the feed's first page
 *       from the consumer's cursor) and to all of them;
 *   (c) the consumer's bytes and seconds to be current: a full re-read of the dataset (every CSV
 *       page) against the rewrite feed from its cursor (buildPageQuery / buildRewritesQuery through
 *       COPY, pages of BENCH_LIMIT, bytes discarded), BENCH_RUNS rounds.
 *
 * bulk: bulk writes of BENCH_REWRITE_SUBMISSIONS rows, one statement each, with the measured
 * triggers enabled and disabled (alternating, BENCH_REPEAT rounds, medians, ratio with/without), in
 * a transaction that is rolled back so every round writes the same rows.
 *
 * Migration 105 on submissions (one deviation on every 100th submission, so the probes find some):
 *   values          an edit of the submissions' values only: no column a deviation shows, no probe;
 *   status          a status change of every submission: one comparison and up to two index probes
 *                   a row, and the deviations' counter moves;
 *   insert          as many new submissions: one probe a row (does a deviation link to the new id?).
 * Migration 110 on named records (as many products, and as many lots naming them):
 *   product insert  as many new products: does a lot, recipe or link row name one of them (one
 *                   semi-join per referencing column over the organization's rows)?
 *   site insert     one new site, in the organization whose submissions (all of them, naming another
 *                   site) it probes: the worst single-row case, a read of every submission.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL          database to use as is (migrated here); default: a fresh database
 *                               exportsvc_bench_rewrites on DATABASE_URL's server, dropped at the end
 *   DATABASE_URL                server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_PARTS                 comma-separated subset of renames,bulk (default both)
 *   BENCH_RENAME_ROWS           submissions at the renamed site (default 1000000)
 *   BENCH_RENAME_OTHER_ROWS     submissions of the same form at another site (default a quarter of those)
 *   BENCH_RENAME_SUPPLIERS      suppliers listing the renamed product (default 10000)
 *   BENCH_RENAME_REPEAT         rounds of (a) (default 9)
 *   BENCH_RUNS                  rounds of (b) and (c) (default 2)
 *   BENCH_LIMIT                 page size of (b) and (c) (default 5000)
 *   BENCH_REWRITE_SUBMISSIONS   rows written by each bulk statement (default 200000)
 *   BENCH_REPEAT                rounds of each bulk statement (default 3)
 */
import { randomUUID } from "node:crypto";
import { Pool } from "pg";
import { migrate } from "@exportsvc/db";
import { buildRewritesQuery, CursorCodec, CursorKeyring, loadRegistryEntry, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { buildDataset, type FormField } from "@exportsvc/form-datasets";
import { provisionDatabase } from "./database";
import { generateSuppliers, BENCH_DATASET } from "./dataset";
import { compareWithWithout, envInt as num, log, median, msSince } from "./helpers";
import { measureRawCopy, payloadPosition, type Measurement } from "./measure";
import { runAsScript } from "../lib/run-script";

interface Measured {
  table: "submissions" | "products" | "sites";
  /** The triggers measured (disabled for the "without" rounds). */
  triggers: string[];
  /** `$1` the organization (whose one form holds every submission), `$2` the row count. */
  sql: string;
  /** What one statement writes, for the log (`n`: the row count). */
  writes?: (n: number) => string;
}

const SUBMISSION_TRIGGERS = ["submissions_deviation_rewrites_ins", "submissions_deviation_rewrites_upd", "submissions_deviation_rewrites_del"];

const MEASURED: Record<string, Measured> = {
  values: {
    table: "submissions",
    triggers: SUBMISSION_TRIGGERS,
    sql: `UPDATE submissions SET "values" = jsonb_build_object('note', 'edited ' || id) WHERE organization_id = $1 AND $2::int > 0`,
  },
  status: {
    table: "submissions",
    triggers: SUBMISSION_TRIGGERS,
    sql: `UPDATE submissions SET status = CASE status WHEN 'Completed' THEN 'InProgress' ELSE 'Completed' END WHERE organization_id = $1 AND $2::int > 0`,
  },
  insert: {
    table: "submissions",
    triggers: SUBMISSION_TRIGGERS,
    sql: `INSERT INTO submissions (organization_id, id, form_id, record_id, status, "values")
          SELECT $1, gen_random_uuid(), (SELECT id FROM forms WHERE organization_id = $1), 'NEW-' || g, 'Completed', '{}'::jsonb FROM generate_series(1, $2::int) g`,
  },
  "product insert": {
    table: "products",
    triggers: ["products_named_rewrites"],
    sql: `INSERT INTO products (organization_id, id, name) SELECT $1, gen_random_uuid(), 'new product ' || g FROM generate_series(1, $2::int) g`,
  },
  "site insert": {
    table: "sites",
    triggers: ["sites_named_rewrites"],
    sql: `INSERT INTO sites (organization_id, id, name, path, time_zone) SELECT $1, gen_random_uuid(), 'New site', 'New site', 'UTC' WHERE $2::int > 0`,
    writes: (n) => `1 site beside ${n} submissions`,
  },
};

/** One bulk statement, rolled back; milliseconds. A VACUUM first removes what the previous round left. */
async function timedStatement(pool: Pool, params: [string, number], measured: Measured, withTriggers: boolean): Promise<number> {
  await pool.query(`VACUUM ${measured.table}, form_dataset_changes, dataset_rewrite_counters, dataset_rewrites, dataset_rewrite_log`);
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    if (!withTriggers) for (const t of measured.triggers) await client.query(`ALTER TABLE ${measured.table} DISABLE TRIGGER ${t}`);
    const started = process.hrtime.bigint();
    await client.query(measured.sql, params);
    return msSince(started);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

const PARTS = ["renames", "bulk"] as const;

async function main(): Promise<void> {
  const parts = (process.env.BENCH_PARTS || PARTS.join(",")).split(",").map((p) => p.trim());
  for (const p of parts) if (!(PARTS as readonly string[]).includes(p)) throw new Error(`BENCH_PARTS: unknown part '${p}' (known: ${PARTS.join(", ")})`);
  const db = await provisionDatabase("exportsvc_bench_rewrites", { benchDatabaseUrl: true, keep: false });
  const pool = new Pool({ connectionString: db.url, max: 3 });
  try {
    await migrate(pool);
    if (parts.includes("renames")) await renames(pool);
    if (parts.includes("bulk")) await bulk(pool);
  } finally {
    await pool.end();
    await db.drop();
  }
}

/**
 * One committed rename of `table`'s record `id` to `name`; milliseconds. With the log (migration 120's
 * trigger) or as before it: the trigger disabled and 046's organization counter bump in its place
 * (`<table>_bench_counter_upd`, created disabled by the bench).
 */
async function timedRename(pool: Pool, table: "sites" | "products", id: string, name: string, withLog: boolean): Promise<number> {
  const swap = (log: "ENABLE" | "DISABLE", counter: "ENABLE" | "DISABLE") =>
    pool.query(`ALTER TABLE ${table} ${log} TRIGGER ${table}_rewrite_log_upd, ${counter} TRIGGER ${table}_bench_counter_upd`);
  if (!withLog) await swap("DISABLE", "ENABLE");
  const client = await pool.connect();
  try {
    const started = process.hrtime.bigint();
    await client.query("BEGIN");
    await client.query(`UPDATE ${table} SET name = $2 WHERE id = $1`, [id, name]);
    await client.query("COMMIT");
    return msSince(started);
  } finally {
    client.release();
    if (!withLog) await swap("ENABLE", "DISABLE");
  }
}

/** 046's trigger as it was before migration 120 replaced it (its function is still there), disabled. */
async function installCounterTrigger(pool: Pool, table: "sites" | "products"): Promise<void> {
  await pool.query(
    `CREATE TRIGGER ${table}_bench_counter_upd AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites('name')`,
  );
  await pool.query(`ALTER TABLE ${table} DISABLE TRIGGER ${table}_bench_counter_upd`);
}

const mb = (m: Measurement) => `${m.rows} rows, ${(m.bytes / 1e6).toFixed(1)} MB, ${m.seconds.toFixed(2)} s`;

async function renames(pool: Pool): Promise<void> {
  const rows = num("BENCH_RENAME_ROWS", 1_000_000);
  const otherRows = num("BENCH_RENAME_OTHER_ROWS", Math.floor(rows / 4), 0);
  const suppliers = num("BENCH_RENAME_SUPPLIERS", 10_000);
  const repeats = num("BENCH_RENAME_REPEAT", 9);
  const runs = num("BENCH_RUNS", 2);
  const limit = num("BENCH_LIMIT", 5000);
  const org = randomUUID();
  const [site, otherSite, formId, product] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  await generateSuppliers(pool, org, suppliers * 4, log); // the organization, resources_suppliers
  await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, 'Renamed product')", [org, product]);
  await pool.query(
    "INSERT INTO supplier_products (organization_id, supplier_id, product_id) SELECT organization_id, id, $2 FROM suppliers WHERE organization_id = $1 ORDER BY random() LIMIT $3",
    [org, product, suppliers],
  );
  await pool.query("INSERT INTO sites (organization_id, id, name, path, time_zone) VALUES ($1, $2, 'Plant', 'Plant', 'Europe/Berlin'), ($1, $3, 'Other', 'Other', 'UTC')", [org, site, otherSite]);
  const field = (type: string, key: string): FormField => ({ id: randomUUID(), key, label: key, type });
  const fields = [field("text", "operator"), field("number", "temperature"), field("text", "batch")];
  await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench form', 'B')", [org, formId]);
  await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())", [org, formId, JSON.stringify(fields)]);
  let t = process.hrtime.bigint();
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, started_at, completed_at, "values", last_modified)
     SELECT $1, gen_random_uuid(), $2, 'B-' || i, CASE WHEN i <= $4::int THEN $3 ELSE $8::uuid END, 'Completed', ts - interval '1 hour', ts,
            jsonb_build_object($5::text, 'operator ' || (i % 97), $6::text, (i % 1000) / 10.0, $7::text, 'B' || lpad((i % 10000)::text, 5, '0')), ts
       FROM generate_series(1, $4::int + $9::int) AS i, LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 second' AS ts) x`,
    [org, formId, site, rows, ...fields.map((f) => f.id), otherSite, otherRows],
  );
  await pool.query("DELETE FROM form_dataset_changes");
  await pool.query("VACUUM ANALYZE submissions, suppliers, supplier_products, products, sites");
  log(`generated ${rows} submissions at the renamed site and ${otherRows} at another in ${msSince(t).toFixed(0)} ms`);
  const codec = new CursorCodec({ keyring: CursorKeyring.parse(`1:${"r".repeat(32)}`) });
  t = process.hrtime.bigint();
  const built = await buildDataset(pool, org, formId, { dropGraceMs: 0, cursorCodec: codec });
  if (built.status !== "built") throw new Error(`build ${built.status}: ${built.error}`);
  log(`built the form's dataset in ${msSince(t).toFixed(0)} ms`);
  const formKey = (await pool.query<{ key: string }>("SELECT key FROM dataset_registry WHERE organization_id = $1 AND kind = 'submission' AND source_ref = $2", [org, formId])).rows[0].key;

  const cases: Array<{ what: string; table: "sites" | "products"; id: string; datasetKey: string }> = [
    { what: `site shown by ${rows} of ${rows + otherRows} submissions (${formKey})`, table: "sites", id: site, datasetKey: formKey },
    { what: `product listed by ${suppliers} of ${suppliers * 4} suppliers (${BENCH_DATASET})`, table: "products", id: product, datasetKey: BENCH_DATASET },
  ];
  for (const c of cases) {
    const entry = await loadRegistryEntry(pool, org, c.datasetKey);
    if (!entry) throw new Error(`no dataset ${c.datasetKey}`);
    const dataset = entry as PageDataset;
    log(`\n${c.what}`);
    log(`  (a) the writer: one committed rename, ${repeats} rounds, alternating; "without": 046's counter in its place (before the feed)`);
    await installCounterTrigger(pool, c.table);
    let round = 0;
    await compareWithWithout("rewrite log", repeats, (enabled) => timedRename(pool, c.table, c.id, `${c.table} name ${round++}`, enabled));

    const feed = (after: CursorPosition | undefined) => buildRewritesQuery(dataset, { organizationId: org, limit, after }, codec);
    const drain = () => measureRawCopy("rewrite feed", pool, dataset, org, codec, limit, payloadPosition, (after) => feed(after ?? cursor));
    let cursor: CursorPosition | undefined;
    const full: Measurement[] = [];
    const viaFeed: Measurement[] = [];
    const firstPage: number[] = [];
    for (let i = 0; i < runs; i++) {
      // The consumer is current: its rewrite cursor is at the feed's end.
      cursor = await feedEnd(pool, org);
      await pool.query(`UPDATE ${c.table} SET name = $2 WHERE id = $1`, [c.id, `${c.table} consumer round ${i}`]);
      const committed = process.hrtime.bigint();
      const first = await measureRawCopy("first page", pool, dataset, org, codec, limit, payloadPosition, (after) => (after ? "SELECT 1 WHERE false" : feed(cursor)));
      firstPage.push(msSince(committed));
      const served = await drain();
      viaFeed.push(served);
      full.push(await measureRawCopy("full re-read", pool, dataset, org, codec, limit, payloadPosition));
      log(`  round ${i + 1}: first ${first.rows} rewritten rows served ${firstPage.at(-1)!.toFixed(0)} ms after the commit, all ${served.rows} after ${(firstPage.at(-1)! + served.seconds * 1000).toFixed(0)} ms`);
      log(`           feed ${mb(served)}; full re-read ${mb(full.at(-1)!)}`);
    }
    const s = (xs: Measurement[]) => median(xs.map((m) => m.seconds));
    log(`  (b) first rewritten rows served: median ${median(firstPage).toFixed(0)} ms after the commit; all of them ${(s(viaFeed) * 1000).toFixed(0)} ms later`);
    log(`  (c) to be current: feed ${(viaFeed[0].bytes / 1e6).toFixed(1)} MB in ${s(viaFeed).toFixed(2)} s vs full re-read ${(full[0].bytes / 1e6).toFixed(1)} MB in ${s(full).toFixed(2)} s (seconds ${(s(viaFeed) / s(full)).toFixed(2)}x, bytes ${(viaFeed[0].bytes / full[0].bytes).toFixed(2)}x)`);
  }
}

/**
 * Where a current consumer's rewrites cursor stands: at the end of the latest group of entries (the
 * position the feed's last row carries), taken from the log instead of paging through the feed.
 */
async function feedEnd(pool: Pool, org: string): Promise<CursorPosition | undefined> {
  const { rows } = await pool.query<{ micros: string | null }>(
    "SELECT (extract(epoch FROM max(rewritten_at)) * 1000000)::bigint::text AS micros FROM dataset_rewrite_log WHERE organization_id = $1",
    [org],
  );
  return rows[0].micros === null ? undefined : { lastModifiedMicros: BigInt(rows[0].micros), id: "00000000-0000-0000-0000-000000000000", rowIndex: 1 };
}

async function bulk(pool: Pool): Promise<void> {
  const submissions = num("BENCH_REWRITE_SUBMISSIONS", 200_000);
  const repeats = num("BENCH_REPEAT", 3);
  {
    const org = randomUUID();
    const formId = randomUUID();
    await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'Bench rewrites')", [org]);
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench form', 'BF')", [org, formId]);
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, status, "values")
       SELECT $1, gen_random_uuid(), $2, 'BF-' || g, 'Completed', jsonb_build_object('note', 'value ' || g) FROM generate_series(1, $3::int) g`,
      [org, formId, submissions],
    );
    await pool.query(
      `INSERT INTO deviations (organization_id, id, code, submission_id, severity)
       SELECT organization_id, gen_random_uuid(), 'DEV-' || n, id, 'Low'
         FROM (SELECT organization_id, id, row_number() OVER (ORDER BY id) AS n FROM submissions WHERE organization_id = $1) s
        WHERE n % 100 = 0`,
      [org],
    );
    await pool.query("INSERT INTO products (organization_id, id, name) SELECT $1, gen_random_uuid(), 'product ' || g FROM generate_series(1, $2::int) g", [org, submissions]);
    await pool.query("INSERT INTO lots (organization_id, id, code, product_id) SELECT organization_id, gen_random_uuid(), 'LOT-' || id, id FROM products WHERE organization_id = $1", [org]);
    const site = randomUUID();
    await pool.query("INSERT INTO sites (organization_id, id, name, path, time_zone) VALUES ($1, $2, 'Plant', 'Plant', 'UTC')", [org, site]);
    await pool.query("UPDATE submissions SET site_id = $2 WHERE organization_id = $1", [org, site]);
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    await pool.query("VACUUM ANALYZE submissions, deviations, products, lots, sites");
    for (const [name, measured] of Object.entries(MEASURED)) {
      log(`${name}: ${measured.writes?.(submissions) ?? `${submissions} ${measured.table}`} in one statement (rolled back), ${repeats} rounds, alternating`);
      await compareWithWithout("rewrite triggers", repeats, (enabled) => timedStatement(pool, [org, submissions], measured, enabled));
    }
  }
}

runAsScript(module, main, "bench:rewrites");
