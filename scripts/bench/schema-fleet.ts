/**
 * `npm run bench:schema-fleet`: the schema service's work for a fleet of organizations (issue 15.3).
 *
 * Seeds BENCH_FLEET_ORGS organizations (default 1000) with BENCH_FLEET_FORMS published forms between
 * them (default 2 700: the first organizations get one more when they do not divide evenly; each form
 * five fields and BENCH_FLEET_SUBMISSIONS submissions, default 3), then for each concurrency in
 * BENCH_FLEET_CONCURRENCY (default "1,4"):
 *   (a) registry sync of every organization through the queue worker (RegistrySyncWorker, the
 *       service's own), every organization queued at once;
 *   (b) a build of every form through the maintenance loop (startMaintenanceLoop, the service's own),
 *       every form queued for a rebuild at once (as a deploy or a mass publish would).
 * Reports wall time per round and the speed-up over the first concurrency, as ratios of one run.
 *
 * Environment: DATABASE_URL (server of the fresh database exportsvc_bench_fleet_<pid>, dropped at the end
 * unless BENCH_KEEP=1), BENCH_FLEET_ORGS, BENCH_FLEET_FORMS, BENCH_FLEET_SUBMISSIONS, BENCH_FLEET_CONCURRENCY.
 */
import { createLogger } from "@exportsvc/common";
import { createPool, migrate } from "@exportsvc/db";
import { startMaintenanceLoop } from "@exportsvc/form-datasets";
import { DEFAULT_SYNCERS, RegistrySyncWorker } from "@exportsvc/schema";
import { provisionDatabase, seedOrganizationsWithSites } from "./database";
import { envInt as num, log, secondsSince as seconds } from "./helpers";
import { runAsScript } from "../lib/run-script";
import { SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";

async function main(): Promise<void> {
  const orgs = num("BENCH_FLEET_ORGS", 1000);
  const forms = num("BENCH_FLEET_FORMS", 2700);
  const submissions = num("BENCH_FLEET_SUBMISSIONS", 3);
  const concurrencies = (process.env.BENCH_FLEET_CONCURRENCY || "1,4").split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1 || n > 32) throw new Error("BENCH_FLEET_CONCURRENCY must list integers 1-32");
    return n;
  });
  const db = await provisionDatabase(`exportsvc_bench_fleet_${process.pid}`);
  const databaseUrl = db.url;
  const maxConcurrency = Math.max(...concurrencies);
  const pool = createPool({ connectionString: databaseUrl, max: maxConcurrency * 2 + 2, applicationName: SERVICE_APPLICATION_NAME.schema });
  try {
    await migrate(pool);
    const seedStart = process.hrtime.bigint();
    await seedOrganizationsWithSites(pool, orgs, "", "Org");
    // Form g belongs to organization (g - 1) % orgs + 1.
    await pool.query(
      `INSERT INTO forms (organization_id, id, name, record_prefix)
       SELECT md5('org' || ((g - 1) % $1 + 1))::uuid, md5('form' || g)::uuid, 'Inspection ' || g, 'F' FROM generate_series(1, $2) g`,
      [orgs, forms],
    );
    const fields = JSON.stringify(
      ["temperature:number", "note:text", "ok:yesNo", "checked_on:date", "inspector:text"].map((s, i) => {
        const [key, type] = s.split(":");
        return { id: `00000000-0000-4000-8000-00000000000${i}`, key, label: key, type };
      }),
    );
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, "values", last_modified)
       SELECT f.organization_id, md5(f.id::text || s)::uuid, f.id, 'F-' || s, md5('site' || f.organization_id)::uuid, 'Completed',
              jsonb_build_object('00000000-0000-4000-8000-000000000000', s, '00000000-0000-4000-8000-000000000001', 'ok'), now()
         FROM forms f, generate_series(1, $1) s`,
      [submissions],
    );
    // Publishing queues one rebuild request per form; the submissions' change rows go with the builds.
    await pool.query(
      `INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) SELECT organization_id, id, 1, $1, now() FROM forms`,
      [fields],
    );
    log(`seeded ${orgs} organizations, ${forms} forms, ${forms * submissions} submissions in ${seconds(seedStart).toFixed(1)} s`);

    const quiet = createLogger("bench", "error");
    const results: { concurrency: number; syncSeconds: number; buildSeconds: number }[] = [];
    for (const concurrency of concurrencies) {
      // (a) every organization queued for a registry sync.
      await pool.query(`INSERT INTO registry_sync_queue (organization_id) SELECT id FROM organizations ON CONFLICT DO NOTHING`);
      const syncStart = process.hrtime.bigint();
      const worker = new RegistrySyncWorker({ pool, databaseUrl, syncers: DEFAULT_SYNCERS, pollMs: 200, log: quiet, concurrency });
      worker.start();
      while (Number((await pool.query("SELECT count(*) AS n FROM registry_sync_queue")).rows[0].n) > 0) await sleep(50);
      const syncSeconds = seconds(syncStart);
      await worker.stop();

      // (b) every form queued for a rebuild (the first round's requests come from publishing).
      if (results.length > 0) await pool.query(`SELECT form_ds.request_rebuild(organization_id, id) FROM forms`);
      await pool.query("DELETE FROM form_dataset_changes WHERE kind = 'submission'");
      const buildStart = process.hrtime.bigint();
      const loop = startMaintenanceLoop(pool, { concurrency, pollIntervalMs: 200, rebuildParallelism: 1, dropGraceMs: 0 });
      while (Number((await pool.query("SELECT count(*) AS n FROM form_dataset_changes")).rows[0].n) > 0) await sleep(50);
      const buildSeconds = seconds(buildStart);
      await loop.stop();
      const ready = Number((await pool.query("SELECT count(*) AS n FROM dataset_registry WHERE kind = 'submission' AND state = 'ready'")).rows[0].n);
      if (ready !== forms) throw new Error(`expected ${forms} ready form datasets, found ${ready}`);
      results.push({ concurrency, syncSeconds, buildSeconds });
      log(`concurrency ${concurrency}: registry sync of ${orgs} organizations ${syncSeconds.toFixed(2)} s, build of ${forms} forms ${buildSeconds.toFixed(2)} s`);
    }
    const base = results[0];
    log("\n| concurrency | registry sync (s) | form builds (s) | builds speed-up |");
    log("|---|---|---|---|");
    for (const r of results) {
      log(`| ${r.concurrency} | ${r.syncSeconds.toFixed(2)} | ${r.buildSeconds.toFixed(2)} | ${(base.buildSeconds / r.buildSeconds).toFixed(2)}× |`);
    }
  } finally {
    await pool.end();
    await db.drop();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

runAsScript(module, main, "bench:schema-fleet");
