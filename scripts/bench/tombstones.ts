/**
 * `npm run bench:tombstones`: what the deletion feed costs.
 *
 *   (a) a bulk delete of BENCH_TOMBSTONE_SUBMISSIONS submissions of one form (one statement), with the
 *       tombstone trigger and with it disabled; each delete runs in a transaction that is rolled back,
 *       so every round deletes the same rows; the two variants alternate BENCH_REPEAT times and the
 *       medians are compared (ratio with/without);
 *   (b) the deletion feed's pages against CSV pages of the same size: the whole feed of those
 *       tombstones and a suppliers dataset of as many rows, each read with its own page query
 *       (`buildDeletionsQuery` / `buildPageQuery`, signed cursors) through
 *       `COPY (...) TO STDOUT (FORMAT csv)` in pages of BENCH_LIMIT, bytes discarded.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL            database to use as is (migrated here); default: a fresh database
 *                                 exportsvc_bench_tombstones on DATABASE_URL's server, dropped at the end
 *   DATABASE_URL                  server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_TOMBSTONE_SUBMISSIONS   submissions deleted in (a) and tombstones read in (b) (default 100000)
 *   BENCH_REPEAT                  rounds of (a) (default 3)
 *   BENCH_LIMIT                   page size of (b) (default 5000)
 */
import { randomUUID } from "node:crypto";
import { Pool } from "pg";
import { migrate } from "@exportsvc/db";
import { buildDeletionsQuery, CursorCodec, CursorKeyring, type PageDataset } from "@exportsvc/datasets";
import { provisionDatabase } from "./database";
import { compareWithWithout, envInt as num, log, msSince } from "./helpers";
import { generateSuppliers, BENCH_DATASET } from "./dataset";
import { measureRawCopy, payloadPosition, type Measurement } from "./measure";
import { runAsScript } from "../lib/run-script";

/**
 * One bulk delete of the form's submissions, rolled back; milliseconds. A VACUUM first removes what
 * the previous rolled-back round left behind (dead index entries would otherwise burden only the
 * rounds that write tombstones).
 */
async function timedDelete(pool: Pool, org: string, formId: string, withTombstones: boolean): Promise<number> {
  await pool.query("VACUUM dataset_tombstones, submissions, form_dataset_changes");
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    if (!withTombstones) await client.query("ALTER TABLE submissions DISABLE TRIGGER submissions_tombstones_del");
    const started = process.hrtime.bigint();
    const { rowCount } = await client.query("DELETE FROM submissions WHERE organization_id = $1 AND form_id = $2", [org, formId]);
    const elapsed = msSince(started);
    const tombstones = (await client.query("SELECT count(*)::int AS n FROM dataset_tombstones WHERE organization_id = $1", [org])).rows[0].n;
    if (tombstones !== (withTombstones ? rowCount : 0)) throw new Error(`expected ${withTombstones ? rowCount : 0} tombstones, found ${tombstones}`);
    return elapsed;
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

const rate = (m: Measurement) => `${m.rows} rows, ${m.pages} pages, ${(m.bytes / 1e6).toFixed(1)} MB in ${m.seconds.toFixed(2)} s (${Math.round(m.rows / m.seconds)} rows/s)`;

async function main(): Promise<void> {
  const submissions = num("BENCH_TOMBSTONE_SUBMISSIONS", 100_000);
  const repeats = num("BENCH_REPEAT", 3);
  const limit = num("BENCH_LIMIT", 5000);
  // Dropped at the end even with BENCH_KEEP=1, as this bench always did.
  const db = await provisionDatabase("exportsvc_bench_tombstones", { benchDatabaseUrl: true, keep: false });
  const pool = new Pool({ connectionString: db.url, max: 3 });
  try {
    await migrate(pool);
    const org = randomUUID();
    const formId = randomUUID();
    await generateSuppliers(pool, org, submissions, log); // also creates the organization
    await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Bench form', 'BF')", [org, formId]);
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, status, "values", last_modified)
       SELECT $1, gen_random_uuid(), $2, 'BF-' || g, 'Completed', jsonb_build_object('note', 'value ' || g), now() - g * interval '1 second'
         FROM generate_series(1, $3::int) g`,
      [org, formId, submissions],
    );
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    await pool.query("VACUUM ANALYZE submissions");
    log(`(a) bulk delete of ${submissions} submissions in one statement (rolled back), ${repeats} rounds, alternating`);
    await compareWithWithout("tombstones", repeats, (enabled) => timedDelete(pool, org, formId, enabled));

    // (b) commit the delete: the feed now holds one tombstone per submission.
    await pool.query("DELETE FROM submissions WHERE organization_id = $1 AND form_id = $2", [org, formId]);
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    await pool.query("VACUUM ANALYZE dataset_tombstones");
    const codec = new CursorCodec({ keyring: CursorKeyring.parse(`1:${"b".repeat(32)}`) });
    const suppliersDataset: PageDataset = {
      key: BENCH_DATASET,
      kind: "resource",
      sourceRef: "suppliers",
      columns: (await pool.query("SELECT columns FROM dataset_registry WHERE organization_id = $1 AND key = $2", [org, BENCH_DATASET])).rows[0].columns,
    };
    const feed: PageDataset = { key: "bench_form", kind: "submission", sourceRef: formId, columns: [], tableName: "unused" };
    log(`(b) whole feed vs whole CSV dataset, pages of ${limit}, COPY to a discarding client`);
    for (let i = 0; i < 2; i++) {
      const deletions = await measureRawCopy("deletion feed", pool, feed, org, codec, limit, payloadPosition, (after) =>
        buildDeletionsQuery(feed, { organizationId: org, limit, after }, codec),
      );
      const csv = await measureRawCopy("CSV (resources_suppliers)", pool, suppliersDataset, org, codec, limit, payloadPosition);
      log(`    round ${i + 1}: deletion feed ${rate(deletions)}`);
      log(`             CSV suppliers ${rate(csv)}`);
      log(`             time per page: feed ${((deletions.seconds * 1000) / deletions.pages).toFixed(1)} ms, CSV ${((csv.seconds * 1000) / csv.pages).toFixed(1)} ms (ratio ${(deletions.seconds / deletions.pages / (csv.seconds / csv.pages)).toFixed(2)})`);
    }
  } finally {
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main, "bench:tombstones");
