/**
 * `npm run bench:tenants`: one node with many organizations (issue 30 item 3; docs/scale-out.md,
 * "One node's ceiling"). On a database of its own (BENCH_TENANTS_DATABASE, default `tenants10k`,
 * on DATABASE_URL's server; dropped at the end unless BENCH_KEEP=1):
 *   1. migrations on the empty database (timed);
 *   2. BENCH_TENANTS organizations (default 10 000), each with a site, one published form with a
 *      grid field (every fourth organization a second one) and three submissions with grid rows,
 *      seeded in SQL; every organization queued for a registry sync;
 *   3. the four services started with their defaults (start-up timed), the schema service's fleet
 *      resync and form builds at its default concurrency (timed until both queues are empty);
 *   4. relations in pg_class, the schemas, the database's size; migrations again (nothing to do)
 *      and a second start-up, now with every organization built;
 *   5. listing and first CSV page of BENCH_TENANTS_SAMPLE random organizations (default 50):
 *      first request and repeat, median and p95;
 *   6. one CSV page of EVERY organization's form dataset through the gateway, then each service's
 *      PostgreSQL backends: count and private memory (RssAnon of each backend process) — first with
 *      connections that live for ever (DATABASE_POOL_MAX_USES=0), then, on a fresh start, with the
 *      default retirement (DATABASE_POOL_MAX_USES, BENCH_TENANTS_MAX_USES to try another value).
 * Prints a markdown table of every figure; BENCH_TENANTS_JSON writes them as JSON.
 *
 * On a slow machine the fleet build can take longer than one sitting: BENCH_TENANTS_BUILD_LIMIT_S
 * stops waiting for it after that many seconds (the rest is measured on the forms built by then,
 * and the figures say how many), and BENCH_TENANTS_REUSE=1 continues on
 * the database an earlier run left (BENCH_KEEP=1, or a run stopped mid-build), skipping migrations
 * and seeding. Steps 5 and 6 read only organizations whose forms are built.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import type { Pool } from "pg";
import { DATABASE_POOL_MAX_USES_DEFAULT, generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { createPool, migrate } from "@exportsvc/db";
import { SERVICE_APPLICATION_NAME, SERVICE_APPLICATION_NAMES } from "@exportsvc/datasets/src/domain";
import { runAsScript } from "../lib/run-script";
import { startStack, type RunningStack } from "../lib/stack";
import { freePort } from "../lib/ports";
import { postgresBackends, type BackendGroup } from "../soak/resources";
import { provisionDatabase, seedOrganizationsWithSites } from "./database";
import { envInt, log, msSince, secondsSince } from "./helpers";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const count = async (pool: Pool, sql: string): Promise<number> => Number((await pool.query(sql)).rows[0].n);

/** Every organization's data, in a few statements: ids derived from md5 so a re-run makes the same fleet. */
async function seed(pool: Pool, orgs: number): Promise<{ forms: number }> {
  await seedOrganizationsWithSites(pool, orgs, "t-", "Tenant");
  // One form per organization, a second one for every fourth.
  await pool.query(
    `INSERT INTO forms (organization_id, id, name, record_prefix)
     SELECT o.id, md5('t-form' || o.id || n)::uuid, CASE n WHEN 1 THEN 'Inspection' ELSE 'Cleaning check' END, 'F'
       FROM organizations o, generate_series(1, 2) n
      WHERE n = 1 OR ('x' || substr(o.id::text, 1, 2))::bit(8)::int % 4 = 0`,
  );
  const f = (i: number) => `00000000-0000-4000-8000-0000000000${String(i).padStart(2, "0")}`;
  const fields = JSON.stringify([
    { id: f(1), key: "temperature", label: "Temperature", type: "number" },
    { id: f(2), key: "note", label: "Note", type: "text" },
    { id: f(3), key: "ok", label: "OK", type: "yesNo" },
    {
      id: f(4), key: "readings", label: "Readings", type: "grid",
      fields: [
        { id: f(5), key: "point", label: "Point", type: "text" },
        { id: f(6), key: "value", label: "Value", type: "number" },
      ],
    },
  ]);
  await pool.query(
    `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, "values", last_modified)
     SELECT fo.organization_id, md5(fo.id::text || s)::uuid, fo.id, 'F-' || s, md5('t-site' || fo.organization_id)::uuid, 'Completed',
            jsonb_build_object($2::text, s, $3::text, 'ok', $4::text,
              jsonb_build_array(jsonb_build_object($5::text, 'A', $6::text, s), jsonb_build_object($5::text, 'B', $6::text, s + 1))),
            now()
       FROM forms fo, generate_series(1, $1) s`,
    [3, f(1), f(2), f(4), f(5), f(6)],
  );
  // Publishing queues one rebuild request per form (the submissions' change rows go with the builds).
  await pool.query(`INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) SELECT organization_id, id, 1, $1, now() FROM forms`, [fields]);
  // As bench:schema-fleet: the submissions' change rows are redundant with the builds (a build reads every row).
  await pool.query("DELETE FROM form_dataset_changes WHERE kind = 'submission'");
  await pool.query(`INSERT INTO registry_sync_queue (organization_id) SELECT id FROM organizations ON CONFLICT DO NOTHING`);
  return { forms: await count(pool, "SELECT count(*) AS n FROM forms") };
}

interface Figures {
  [name: string]: number | string;
}

async function main(): Promise<number> {
  const orgs = envInt("BENCH_TENANTS", 10_000);
  const sampleSize = envInt("BENCH_TENANTS_SAMPLE", 50);
  const maxUses = envInt("BENCH_TENANTS_MAX_USES", DATABASE_POOL_MAX_USES_DEFAULT);
  const touchConcurrency = envInt("BENCH_TENANTS_CONCURRENCY", 8);
  const buildLimitS = envInt("BENCH_TENANTS_BUILD_LIMIT_S", 0, 0);
  const reuse = process.env.BENCH_TENANTS_REUSE === "1";
  const name = process.env.BENCH_TENANTS_DATABASE || "tenants10k";
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error("BENCH_TENANTS_DATABASE must be a lower-case identifier");
  const figures: Figures = { organizations: orgs };
  const backends: Record<string, BackendGroup[]> = {};
  const put = (k: string, v: number | string) => {
    figures[k] = typeof v === "number" ? Math.round(v * 100) / 100 : v;
    log(`${k}: ${figures[k]}`);
  };

  const db = await provisionDatabase(name, { reuse });
  const pool = createPool({ connectionString: db.url, max: 4, applicationName: "bench-tenants" });
  const keyHashSecret = randomBytes(24).toString("base64url");
  const cursorKeys = `1:${randomBytes(24).toString("base64")}`;
  let stack: RunningStack | undefined;
  const start = async (env: Record<string, string>) => {
    const [gateway, catalog, exportPort, schema] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const t = process.hrtime.bigint();
    stack = await startStack(
      { databaseUrl: db.url, redisUrl: process.env.REDIS_URL || undefined, keyHashSecret, cursorKeys, ports: { gateway, catalog, export: exportPort, schema }, env: { RATE_LIMIT_PER_WINDOW: "1000000", ...env } },
      300_000,
    );
    return secondsSince(t);
  };
  const stop = async () => {
    await stack?.stop();
    stack = undefined;
  };
  try {
    let t = process.hrtime.bigint();
    const seeded = reuse && (await pool.query("SELECT to_regclass('organizations') IS NOT NULL AS ok")).rows[0].ok && (await count(pool, "SELECT count(*) AS n FROM organizations")) > 0;
    let forms: number;
    if (seeded) {
      forms = await count(pool, "SELECT count(*) AS n FROM forms");
      put("organizations (reused database)", await count(pool, "SELECT count(*) AS n FROM organizations"));
    } else {
      await migrate(pool);
      put("migrations on an empty database (s)", secondsSince(t));
      t = process.hrtime.bigint();
      forms = (await seed(pool, orgs)).forms;
      put("seeding in SQL (s)", secondsSince(t));
    }
    put("forms", forms);

    put("start-up before the fleet is built (s)", await start({ DATABASE_POOL_MAX_USES: "0" }));
    t = process.hrtime.bigint();
    let synced = 0;
    let built = 0;
    for (let i = 0; ; i++) {
      const queued = await count(pool, "SELECT count(*) AS n FROM registry_sync_queue");
      const pending = await count(pool, "SELECT count(*) AS n FROM form_dataset_changes");
      if (!synced && queued === 0) put("fleet registry resync at the default concurrency (s)", (synced = secondsSince(t)));
      if (queued === 0 && pending === 0) {
        built = secondsSince(t);
        break;
      }
      if (buildLimitS && secondsSince(t) > buildLimitS) {
        log(`  stopped waiting after ${buildLimitS} s: ${queued} organizations still queued, ${pending} form changes pending `);
        break;
      }
      if (i % 30 === 0) log(`  … ${queued} organizations queued for a registry sync, ${pending} form changes pending`);
      await sleep(1000);
    }
    const ready = await count(pool, "SELECT count(*) AS n FROM dataset_registry WHERE kind = 'submission' AND state = 'ready'");
    if (built) {
      put("fleet build of every form at the default concurrency (s)", built);
      // A reused database may hold forms whose build requests an earlier run left unfinished.
      if (ready !== forms && !seeded) throw new Error(`expected ${forms} ready form datasets, found ${ready}`);
    } else put("forms built when the wait stopped", ready);
    backends["schema pool after the fleet build (connections never retired)"] = (await postgresBackends(pool)).filter((g) => g.application === SERVICE_APPLICATION_NAME.schema);
    await stop();

    put("relations in pg_class", await count(pool, "SELECT count(*) AS n FROM pg_class"));
    put("relations in form_ds_<org> schemas", await count(pool, "SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname LIKE 'form\\_ds\\_%'"));
    const orgSchemas = await count(pool, "SELECT count(*) AS n FROM pg_namespace WHERE nspname LIKE 'form\\_ds\\_%'");
    put("organization schemas (form_ds_<org>)", orgSchemas);
    put("tables per organization schema", (await count(pool, "SELECT count(*) AS n FROM pg_tables WHERE schemaname LIKE 'form\\_ds\\_%'")) / Math.max(1, orgSchemas));
    put("database size (MB)", (await count(pool, "SELECT pg_database_size(current_database()) AS n")) / 2 ** 20);
    put("pg_class + pg_attribute size (MB)", (await count(pool, "SELECT pg_total_relation_size('pg_class') + pg_total_relation_size('pg_attribute') AS n")) / 2 ** 20);
    t = process.hrtime.bigint();
    await migrate(pool);
    put("migrations with every organization built (nothing to apply) (s)", secondsSince(t));

    // An API key for every organization.
    const keys = new Map<string, string>();
    const ids = (await pool.query<{ id: string }>("SELECT id FROM organizations ORDER BY id")).rows.map((r) => r.id);
    const rows: [string, string, string][] = [];
    for (const id of ids) {
      const key = generateApiKey();
      keys.set(id, key.secret);
      rows.push([key.id, id, hashApiKeySecret(key.secret, keyHashSecret)]);
    }
    await pool.query(
      "INSERT INTO api_keys (id, organization_id, secret_hash, description) SELECT * , 'bench-tenants' FROM unnest($1::text[], $2::uuid[], $3::text[])",
      [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])],
    );
    const datasets = new Map((await pool.query<{ organization_id: string; key: string }>("SELECT DISTINCT ON (organization_id) organization_id, key FROM dataset_registry WHERE kind = 'submission' AND state = 'ready' ORDER BY organization_id, key")).rows.map((r) => [r.organization_id, r.key]));
    // Only organizations with a built form are read (all of them unless the build wait was cut short).
    const builtIds = ids.filter((id) => datasets.has(id));
    put("organizations read below (a form built)", builtIds.length);

    const touchAll = async (label: string, baseUrl: string) => {
      let next = 0;
      let failures = 0;
      const t0 = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: touchConcurrency }, async () => {
          for (let i = next++; i < builtIds.length; i = next++) {
            const res = await fetch(`${baseUrl}/v1/datasets/${datasets.get(builtIds[i])}/csv?limit=10`, { headers: { authorization: `Bearer ${keys.get(builtIds[i])}` } });
            await res.arrayBuffer();
            if (res.status !== 200) failures++;
            if ((i + 1) % 2000 === 0) log(`  … ${label}: ${i + 1} organizations read`);
          }
        }),
      );
      put(`${label}: one page of every organization (s)`, secondsSince(t0));
      if (failures) put(`${label}: pages not 200`, failures);
      backends[label] = await postgresBackends(pool);
    };

    // Start-up with the fleet built; the requests' connections live for ever (the behaviour before the bound).
    put("start-up with every organization built (s)", await start({ DATABASE_POOL_MAX_USES: "0" }));
    const sample = [...builtIds].sort(() => Math.random() - 0.5).slice(0, sampleSize);
    const timings: Record<string, number[]> = { "listing, first": [], "listing, repeat": [], "page, first": [], "page, repeat": [] };
    for (const id of sample) {
      for (const [what, url] of [["listing", "/v1/datasets"], ["page", `/v1/datasets/${datasets.get(id)}/csv?limit=100`]] as const) {
        for (const round of ["first", "repeat"] as const) {
          const t1 = process.hrtime.bigint();
          const res = await fetch(`${stack!.baseUrl}${url}`, { headers: { authorization: `Bearer ${keys.get(id)}` } });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`${what} of ${id}: HTTP ${res.status}`);
          timings[`${what}, ${round}`].push(msSince(t1));
        }
      }
    }
    for (const [k, xs] of Object.entries(timings)) {
      put(`${k} of a random organization, median (ms)`, pct(xs, 50));
      put(`${k} of a random organization, p95 (ms)`, pct(xs, 95));
    }
    await touchAll("connections never retired (DATABASE_POOL_MAX_USES=0)", stack!.baseUrl);
    await stop();
    await start({ DATABASE_POOL_MAX_USES: String(maxUses) });
    await touchAll(`connections retired after ${maxUses} uses (DATABASE_POOL_MAX_USES=${maxUses})`, stack!.baseUrl);
    await stop();

    log("\n| figure | value |\n|---|---|");
    for (const [k, v] of Object.entries(figures)) log(`| ${k} | ${v} |`);
    log("\n| PostgreSQL backends | pool | connections | private memory, all (MB) | largest backend (MB) |\n|---|---|---|---|---|");
    for (const [label, groups] of Object.entries(backends)) {
      for (const g of groups.filter((x) => SERVICE_APPLICATION_NAMES.includes(x.application))) {
        log(`| ${label} | ${g.application} | ${g.connections} | ${(g.anonBytes / 2 ** 20).toFixed(0)} | ${(g.maxAnonBytes / 2 ** 20).toFixed(1)} |`);
      }
    }
    if (process.env.BENCH_TENANTS_JSON) writeFileSync(process.env.BENCH_TENANTS_JSON, JSON.stringify({ figures, backends }, null, 2));
    return 0;
  } finally {
    await stop().catch(() => undefined);
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main);
