/**
 * `npm run bench:rewrites`: what the rewrite counters' triggers cost the source's writers. Bulk
 * writes of BENCH_REWRITE_SUBMISSIONS rows, one statement each, with the measured triggers enabled
 * and disabled (alternating, BENCH_REPEAT rounds, medians, ratio with/without), in a transaction
 * that is rolled back so every round writes the same rows.
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
 *   BENCH_REWRITE_SUBMISSIONS   rows written by each statement (default 200000)
 *   BENCH_REPEAT                rounds (default 3)
 */
import { randomUUID } from "node:crypto";
import { Pool } from "pg";
import { migrate } from "@exportsvc/db";
import { provisionDatabase } from "./database";
import { compareWithWithout, envInt as num, log, msSince } from "./helpers";
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
  await pool.query(`VACUUM ${measured.table}, form_dataset_changes, dataset_rewrite_counters, dataset_rewrites`);
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

async function main(): Promise<void> {
  const submissions = num("BENCH_REWRITE_SUBMISSIONS", 200_000);
  const repeats = num("BENCH_REPEAT", 3);
  const db = await provisionDatabase("exportsvc_bench_rewrites", { benchDatabaseUrl: true, keep: false });
  const pool = new Pool({ connectionString: db.url, max: 3 });
  try {
    await migrate(pool);
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
  } finally {
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main, "bench:rewrites");
