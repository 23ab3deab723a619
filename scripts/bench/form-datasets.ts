/**
 * `npx tsx scripts/bench/form-datasets.ts`: what materializing form datasets costs.
 *
 * On a generated form (every field type, a grid with a nested grid) with many submissions:
 *   (a) `buildDataset`: rebuild of every dataset of the form (render + index + registry swap);
 *   (b) baseline: a plain `CREATE TABLE AS SELECT * FROM submissions WHERE form_id = ...` of the
 *       same rows (what copying the source costs without rendering anything);
 *   (c) commit-to-visibility lag: one submission updated and committed at a time, with
 *       `startMaintenanceLoop` running; time until the new value is readable in the dataset table.
 *
 * Environment (all optional):
 *   BENCH_DATABASE_URL     database to use as is (migrated here); default: a fresh database
 *                          exportsvc_bench_forms on DATABASE_URL's server, dropped at the end unless BENCH_KEEP=1
 *   DATABASE_URL           server for the fresh database (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_FORM_SUBMISSIONS submissions to generate (default 100000)
 *   BENCH_LAG_SAMPLES      updates measured for the lag (default 50)
 */
import { randomUUID } from "node:crypto";
import { Client } from "pg";
import { createPool, migrate } from "@exportsvc/db";
import { buildDataset, startMaintenanceLoop, type FormField } from "@exportsvc/form-datasets";

const num = (name: string, def: number) => {
  const v = process.env[name];
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
};
const log = (m: string) => process.stdout.write(`${m}\n`);
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

async function provisionDatabase(): Promise<{ url: string; drop?: () => Promise<void> }> {
  if (process.env.BENCH_DATABASE_URL) return { url: process.env.BENCH_DATABASE_URL };
  const adminUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres";
  const name = "exportsvc_bench_forms";
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop:
      process.env.BENCH_KEEP === "1"
        ? undefined
        : async () => {
            const c = new Client({ connectionString: adminUrl });
            await c.connect();
            await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
            await c.end();
          },
  };
}

const f = (type: string, key: string, extra: Partial<FormField> = {}): FormField => ({ id: randomUUID(), key, label: key, type, ...extra });

async function main(): Promise<void> {
  const submissions = num("BENCH_FORM_SUBMISSIONS", 100_000);
  const lagSamples = num("BENCH_LAG_SAMPLES", 50);
  const db = await provisionDatabase();
  const pool = createPool({ connectionString: db.url, max: 6 });
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
      f("text", "operator"),
      f("paragraph", "notes"),
      f("number", "temperature", { requiresVerification: true }),
      f("yesNo", "passed"),
      f("date", "production_date"),
      f("dateTime", "sampled_at"),
      f("select", "line", { options: [{ key: "l1", label: "Line 1" }, { key: "l2", label: "Line 2" }] }),
      f("checkboxGroup", "allergens", { options: ["milk", "egg", "nuts", "soy"].map((k) => ({ key: k, label: k })) }),
      f("signature", "approver"),
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

    t = process.hrtime.bigint();
    const built = await buildDataset(pool, orgId, formId);
    const buildMs = ms(t);
    if (built.status !== "built") throw new Error(`build ${built.status}: ${built.error}`);
    log(`(a) buildDataset (${built.datasets.length} datasets): ${buildMs.toFixed(0)} ms, ${((submissions / buildMs) * 1000).toFixed(0)} submissions/s`);

    t = process.hrtime.bigint();
    await pool.query(`CREATE TABLE bench_plain_copy AS SELECT * FROM submissions WHERE organization_id = $1 AND form_id = $2`, [orgId, formId]);
    const plainMs = ms(t);
    await pool.query("DROP TABLE bench_plain_copy");
    log(`(b) CREATE TABLE AS of the same submissions: ${plainMs.toFixed(0)} ms  (rebuild / plain = ${(buildMs / plainMs).toFixed(1)}x)`);

    const entry = await pool.query<{ table_name: string; columns: { key: string; source: { column: string } }[] }>(
      "SELECT table_name, columns FROM dataset_registry WHERE organization_id = $1 AND key = 'bench_form'",
      [orgId],
    );
    const table = entry.rows[0].table_name;
    const operatorColumn = entry.rows[0].columns.find((c) => c.key === "operator")!.source.column;
    const ids = (await pool.query<{ id: string }>("SELECT id FROM submissions WHERE organization_id = $1 LIMIT $2", [orgId, lagSamples])).rows.map((r) => r.id);

    const loop = startMaintenanceLoop(pool, { pollIntervalMs: 1000, onError: (e) => log(`loop error: ${String(e)}`) });
    await new Promise((r) => setTimeout(r, 300));
    const lags: number[] = [];
    try {
      for (const [i, id] of ids.entries()) {
        const marker = `lag ${i}`;
        await pool.query(`UPDATE submissions SET "values" = jsonb_set("values", ARRAY[$2::text], to_jsonb($3::text)), last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $4`, [
          orgId,
          operator.id,
          marker,
          id,
        ]);
        const committed = process.hrtime.bigint();
        for (;;) {
          const seen = await pool.query(`SELECT 1 FROM ${table} WHERE organization_id = $1 AND id = $2 AND ${operatorColumn} = $3`, [orgId, id, marker]);
          if (seen.rowCount) break;
          if (ms(committed) > 30_000) throw new Error("change not visible after 30 s");
          await new Promise((r) => setTimeout(r, 2));
        }
        lags.push(ms(committed));
      }
    } finally {
      await loop.stop();
    }
    lags.sort((a, b) => a - b);
    const q = (p: number) => lags[Math.min(lags.length - 1, Math.floor(p * lags.length))].toFixed(1);
    log(`(c) commit-to-visibility lag over ${lags.length} updates: p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${lags[lags.length - 1].toFixed(1)} ms`);
  } finally {
    await pool.end();
    await db.drop?.();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
