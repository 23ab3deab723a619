/**
 * `npm run bench:fairness`: a third organization's page latency while two other organizations hold
 * every stream they may (5 each) on ~40 MB pages they never read (issue 12's slow-reader attack),
 * against the same pages on an idle system. Reports the ratio of medians (target ≤ 2×); nothing is
 * asserted on time.
 *
 * The four services run as processes with their default configuration (export pool 16, 5
 * connections per organization), except STREAM_STALL_TIMEOUT_MS, raised so the attack lasts the
 * whole measurement (with the default 60 s the stalled pages would be aborted part-way).
 *
 * Environment (all optional):
 *   DATABASE_URL             server for the fresh database exportsvc_bench_fairness (dropped at the end unless BENCH_KEEP=1)
 *   BENCH_FAIRNESS_ROWS      rows of the third organization (default 20000)
 *   BENCH_FAIRNESS_LIMIT     its page size (default 1000)
 *   BENCH_FAIRNESS_RUNS      full exports of its rows per phase (default 5)
 *   BENCH_FAIRNESS_STALLED   stalled streams per attacking organization (default 5)
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { createPool, migrate } from "@exportsvc/db";
import { provisionDatabase } from "./database";
import { envInt as num, log } from "./helpers";
import { startStack } from "../lib/stack";
import { openStalledReaders, runningCopies, seedLargeSuppliers, waitUntil } from "../lib/stalled-readers";
import { freePort } from "../../test/support/ports";
import { runAsScript } from "../lib/run-script";

const DB_NAME = "exportsvc_bench_fairness";

async function newOrganization(pool: Pool, keyHashSecret: string, name: string): Promise<{ organizationId: string; secret: string }> {
  const organizationId = randomUUID();
  await pool.query("INSERT INTO organizations (id, name) VALUES ($1, $2)", [organizationId, name]);
  await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true)", [organizationId]);
  const key = generateApiKey();
  await pool.query("INSERT INTO api_keys (id, organization_id, secret_hash, description) VALUES ($1, $2, $3, 'bench')", [
    key.id,
    organizationId,
    hashApiKeySecret(key.secret, keyHashSecret),
  ]);
  return { organizationId, secret: key.secret };
}

/** Pages through the dataset with the loop of docs/contract.md §4; returns each page's latency (request to last byte), in ms. */
async function exportAll(baseUrl: string, secret: string, limit: number): Promise<{ latencies: number[]; rows: number }> {
  const latencies: number[] = [];
  let rows = 0;
  let cursor: string | undefined;
  for (;;) {
    const qs = new URLSearchParams({ limit: String(limit) });
    if (cursor) qs.set("cursor", cursor);
    const started = performance.now();
    const res = await fetch(`${baseUrl}/v1/datasets/resources_suppliers/csv?${qs}`, { headers: { Authorization: `Bearer ${secret}` } });
    const text = await res.text();
    latencies.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`third organization's page failed: HTTP ${res.status} ${text.slice(0, 300)}`);
    const lines = text.split("\n").filter((l) => l.length > 0);
    const pageRows = lines.length - 1;
    rows += pageRows;
    if (pageRows < limit) return { latencies, rows };
    const last = lines[lines.length - 1];
    cursor = last.slice(last.lastIndexOf(",") + 1);
  }
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

async function measure(baseUrl: string, secret: string, limit: number, runs: number, expectedRows: number, latencies: number[] = []) {
  for (let i = 0; i < runs; i++) {
    const run = await exportAll(baseUrl, secret, limit);
    if (run.rows !== expectedRows) throw new Error(`exported ${run.rows} rows, expected ${expectedRows}`);
    latencies.push(...run.latencies);
  }
  return { p50: quantile(latencies, 0.5), p95: quantile(latencies, 0.95), pages: latencies.length };
}

async function main() {
  const rows = num("BENCH_FAIRNESS_ROWS", 20_000);
  const limit = num("BENCH_FAIRNESS_LIMIT", 1000);
  const runs = num("BENCH_FAIRNESS_RUNS", 5);
  const stalledPerOrganization = num("BENCH_FAIRNESS_STALLED", 5);
  const db = await provisionDatabase(DB_NAME);
  const pool = createPool({ connectionString: db.url, max: 4, applicationName: "exportsvc-bench" });
  const keyHashSecret = randomBytes(24).toString("base64url");
  try {
    await migrate(pool);
    const [a, b, c] = [
      await newOrganization(pool, keyHashSecret, "Slow reader A"),
      await newOrganization(pool, keyHashSecret, "Slow reader B"),
      await newOrganization(pool, keyHashSecret, "Third organization"),
    ];
    log(`seeding: 2 x 5000 suppliers of ~8 KiB (pages of ~40 MB), ${rows} suppliers of ~300 B for the third organization`);
    await seedLargeSuppliers(pool, a.organizationId, 5000);
    await seedLargeSuppliers(pool, b.organizationId, 5000);
    await seedLargeSuppliers(pool, c.organizationId, rows, 256);
    await pool.query("VACUUM ANALYZE suppliers");

    const ports = await Promise.all(Array.from({ length: 4 }, freePort));
    const stack = await startStack({
      databaseUrl: db.url,
      redisUrl: process.env.REDIS_URL || undefined,
      keyHashSecret,
      cursorKeys: `1:${randomBytes(24).toString("base64")}`,
      ports: { gateway: ports[0], catalog: ports[1], export: ports[2], schema: ports[3] },
      env: { RATE_LIMIT_PER_WINDOW: "1000000", STREAM_STALL_TIMEOUT_MS: "3600000" },
      logLevel: "warn",
    });
    const readers: Array<ReturnType<typeof openStalledReaders>> = [];
    try {
      // Warm-up (registry syncs, caches) and a check that every organization is served.
      for (const org of [a, b]) {
        const res = await fetch(`${stack.baseUrl}/v1/datasets/resources_suppliers/csv?limit=1`, { headers: { Authorization: `Bearer ${org.secret}` } });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`warm-up page failed: HTTP ${res.status}`);
      }
      await exportAll(stack.baseUrl, c.secret, limit);

      // Idle is measured before and after the attack (half the runs each, pooled), so a drift of the
      // machine's load during the run does not bias the ratio one way.
      const idleLatencies: number[] = [];
      await measure(stack.baseUrl, c.secret, limit, Math.ceil(runs / 2), rows, idleLatencies);

      const path = "/v1/datasets/resources_suppliers/csv?limit=5000";
      readers.push(openStalledReaders(stack.baseUrl, a.secret, stalledPerOrganization, path));
      readers.push(openStalledReaders(stack.baseUrl, b.secret, stalledPerOrganization, path));
      const held = async () => (await runningCopies(pool, a.organizationId)) + (await runningCopies(pool, b.organizationId));
      await waitUntil(async () => (await held()) >= 2 * Math.min(stalledPerOrganization, 5), "the stalled pages to hold their connections");
      log(`attack:       ${await held()} stalled pages of two organizations hold database connections`);

      const attacked = await measure(stack.baseUrl, c.secret, limit, runs, rows);
      log(`under attack:  ${attacked.pages} pages of ${limit}, p50 ${attacked.p50.toFixed(1)} ms, p95 ${attacked.p95.toFixed(1)} ms`);
      log(`still held after the measurement: ${await held()} stalled pages`);
      for (const r of readers.splice(0)) r.close();
      await waitUntil(async () => (await held()) === 0, "the stalled pages to end");
      const idle = await measure(stack.baseUrl, c.secret, limit, Math.ceil(runs / 2), rows, idleLatencies);
      log(`idle (before and after): ${idle.pages} pages of ${limit}, p50 ${idle.p50.toFixed(1)} ms, p95 ${idle.p95.toFixed(1)} ms`);
      const ratio = attacked.p50 / idle.p50;
      log(`\nthird organization's page latency under attack / idle (p50): ${ratio.toFixed(2)}x (target <= 2.00x: ${ratio <= 2 ? "met" : "NOT met"})`);
      log(`p95 ratio: ${(attacked.p95 / idle.p95).toFixed(2)}x`);
    } finally {
      for (const r of readers) r.close();
      await stack.stop();
    }
  } finally {
    await pool.end();
    await db.drop();
  }
}

runAsScript(module, main, "bench:fairness");
