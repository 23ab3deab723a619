/**
 * `npm run bench:horizon`: what the visibility horizon costs per export page (it runs on every page)
 * and per listing, before and after issue 18, and how that cost grows with the number of sessions
 * and of pending form changes.
 *
 *   before: the pre-issue-18 page query (oldest xact_start of any session; oldest pending change of
 *           the form by joining form_dataset_changes to submissions);
 *   after:  pageHorizon (writers only, declared organization, floor, pending stamp by index probe)
 *           and listingHorizon (the same plus the floor upsert and one probe per form).
 * Each is timed over BENCH_CALLS calls, interleaved, on one connection (median and p90 µs) in four
 * scenarios: few/many other sessions × no/many pending changes of the paged form. Other sessions are
 * a mix of idle sessions, open readers and open writers (half of them declaring an organization).
 * Figures are reported as ratios within this run.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL   database to use as is (migrated here); default: a fresh database
 *                        exportsvc_bench_horizon on DATABASE_URL's server, dropped at the end unless BENCH_KEEP=1
 *   DATABASE_URL         server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_SESSIONS_FEW   other sessions in the "few" scenarios (default 4)
 *   BENCH_SESSIONS_MANY  other sessions in the "many" scenarios (default 80; mind max_connections)
 *   BENCH_PENDING        pending changes of the paged form in the "many" scenarios (default 20000)
 *   BENCH_FORMS          forms in the listing (default 20)
 *   BENCH_CALLS          calls per measurement (default 400)
 */
import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { createPool, migrate } from "@exportsvc/db";
import { declaredWriterApplicationName } from "@exportsvc/common";
import { provisionDatabase } from "./database";
import { envInt, log } from "./helpers";
import { listingHorizon, pageHorizon, SERVICE_APPLICATION_NAME, SERVICE_APPLICATION_NAMES } from "@exportsvc/datasets";
import { runAsScript } from "../lib/run-script";

/** These settings may be 0 (e.g. no other sessions). */
const num = (name: string, def: number) => envInt(name, def, 0);

/** The page horizon query as it was before issue 18 (services/export/src/visibility.ts at dbca1ee). */
const BEFORE_SQL = `
SELECT (extract(epoch FROM least(
          (SELECT min(a.xact_start) FROM pg_stat_activity a
            WHERE a.datname = current_database()
              AND a.backend_type = 'client backend'
              AND a.pid <> pg_backend_pid()
              AND a.xact_start IS NOT NULL
              AND a.application_name <> ALL ($1::text[])),
          CASE WHEN $2::uuid IS NULL THEN NULL ELSE
            (SELECT min(s.last_modified) FROM form_dataset_changes c
               JOIN submissions s ON s.organization_id = c.organization_id AND s.id = c.submission_id
              WHERE c.organization_id = $3::uuid AND c.form_id = $2::uuid AND c.kind = 'submission') END,
          clock_timestamp())) * 1000000)::bigint::text AS horizon`;

interface Timing {
  p10Us: number;
  medianUs: number;
  p90Us: number;
}

/**
 * Times the variants interleaved (one call of each per round), so that load from other processes
 * on the machine falls on all of them alike and their ratios stay meaningful.
 */
async function timeInterleaved(calls: number, variants: Array<() => Promise<unknown>>): Promise<Timing[]> {
  for (let i = 0; i < Math.min(20, calls); i++) for (const v of variants) await v(); // warm-up
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < calls; i++) {
    for (const [k, v] of variants.entries()) {
      const t = process.hrtime.bigint();
      await v();
      samples[k].push(Number(process.hrtime.bigint() - t) / 1000);
    }
  }
  return samples.map((s) => {
    s.sort((a, b) => a - b);
    return { p10Us: s[Math.floor(s.length * 0.1)], medianUs: s[Math.floor(s.length / 2)], p90Us: s[Math.floor(s.length * 0.9)] };
  });
}

/** Other sessions: 1/2 idle, 1/4 open readers, 1/4 open writers (half of those declared). */
async function openSessions(url: string, n: number, organizations: string[]): Promise<Client[]> {
  const clients: Client[] = [];
  for (let i = 0; i < n; i++) {
    const role = i % 4;
    const declared = role === 3 && i % 8 === 3;
    const c = new Client({
      connectionString: url,
      application_name: declared ? declaredWriterApplicationName("bench-writer", organizations[i % organizations.length]) : `bench-${i}`,
    });
    await c.connect();
    if (role === 2) {
      await c.query("BEGIN");
      await c.query("SELECT count(*) FROM organizations");
    } else if (role === 3) {
      await c.query("BEGIN");
      await c.query("SELECT pg_current_xact_id()");
    }
    clients.push(c);
  }
  return clients;
}

async function seedPending(pool: Pool, org: string, form: string, pending: number): Promise<void> {
  await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
  if (pending === 0) return;
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, last_modified)
     SELECT $1, gen_random_uuid(), $2, 'R-' || g, now() - g * interval '1 second' FROM generate_series(1, $3) g
     ON CONFLICT DO NOTHING`,
    [org, form, pending],
  );
  // The trigger logged the inserts (with their stamps) as pending changes; keep exactly `pending`.
  await pool.query(
    `DELETE FROM form_dataset_changes WHERE organization_id = $1 AND seq NOT IN (
       SELECT seq FROM form_dataset_changes WHERE organization_id = $1 ORDER BY seq LIMIT $2)`,
    [org, pending],
  );
  await pool.query("ANALYZE form_dataset_changes");
  await pool.query("ANALYZE submissions");
}

async function main(): Promise<void> {
  const few = num("BENCH_SESSIONS_FEW", 4);
  const many = num("BENCH_SESSIONS_MANY", 80);
  const pendingMany = num("BENCH_PENDING", 20000);
  const formCount = Math.max(1, num("BENCH_FORMS", 20));
  const calls = Math.max(1, num("BENCH_CALLS", 400));
  const db = await provisionDatabase("exportsvc_bench_horizon", { benchDatabaseUrl: true });
  const pool = createPool({ connectionString: db.url, max: 2, applicationName: SERVICE_APPLICATION_NAME.export });
  const sessions: Client[] = [];
  try {
    await migrate(pool);
    const orgs = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const o of orgs) await pool.query("INSERT INTO organizations (id, name) VALUES ($1, $2)", [o, `bench ${o}`]);
    const org = orgs[0];
    const forms = Array.from({ length: formCount }, () => randomUUID());
    const form = forms[0];
    const conn = await pool.connect();
    conn.release();

    log(`visibility horizon per call (p10 / median / p90 µs over ${calls} calls); forms in the listing: ${formCount}`);
    log("scenario                         | before page           | after page            | after listing         | after/before page (p10, median)");
    const results: Record<string, { before: Timing; page: Timing; listing: Timing }> = {};
    let seeded = -1;
    for (const [sessionCount, pending] of [
      [few, 0],
      [many, 0],
      [few, pendingMany],
      [many, pendingMany],
    ] as const) {
      if (pending !== seeded) await seedPending(pool, org, form, pending); // once per count: no dead entries to skip
      seeded = pending;
      while (sessions.length > sessionCount) await sessions.pop()!.end();
      if (sessions.length < sessionCount) sessions.push(...(await openSessions(db.url, sessionCount - sessions.length, orgs.slice(1))));
      const [before, page, listing] = await timeInterleaved(calls, [
        () => pool.query(BEFORE_SQL, [SERVICE_APPLICATION_NAMES, form, org]),
        () => pageHorizon(pool, org, form),
        () => listingHorizon(pool, org, forms),
      ]);
      const name = `${String(sessionCount).padStart(3)} sessions, ${String(pending).padStart(6)} pending`;
      results[name] = { before, page, listing };
      const fmt = (t: Timing) => `${t.p10Us.toFixed(0).padStart(5)} / ${t.medianUs.toFixed(0).padStart(5)} / ${t.p90Us.toFixed(0).padStart(6)}`;
      log(
        `${name.padEnd(32)} | ${fmt(before)} | ${fmt(page)} | ${fmt(listing)} | ${(page.p10Us / before.p10Us).toFixed(2)}, ${(page.medianUs / before.medianUs).toFixed(2)}`,
      );
    }
    const keys = Object.keys(results);
    const ratio = (a: string, b: string, k: "before" | "page" | "listing") =>
      `${(results[a][k].p10Us / results[b][k].p10Us).toFixed(2)}/${(results[a][k].medianUs / results[b][k].medianUs).toFixed(2)}`;
    log("");
    log("growth (p10/median ratios):");
    for (const k of ["before", "page", "listing"] as const) {
      log(
        `  ${k.padEnd(8)} many/few sessions: ${ratio(keys[1], keys[0], k)}   pending ${pendingMany}/0: ${ratio(keys[2], keys[0], k)}   both: ${ratio(keys[3], keys[0], k)}`,
      );
    }
  } finally {
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main, "bench:horizon");
