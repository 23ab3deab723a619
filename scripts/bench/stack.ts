import { randomBytes } from "node:crypto";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { loadRegistryEntry, loadRenderedPlan, servesRendered } from "@exportsvc/datasets";
import { freePort } from "../lib/ports";
import { startStack, type RunningStack } from "../lib/stack";

/**
 * BENCH_STACK=1: the four services as processes on the bench database (as `npm start` runs them),
 * with a fresh key of the bench organization, for the HTTP measurement.
 */
/** A fresh CURSOR_KEYS value for a bench's stack (and for the builds it runs before starting it, which store signed cursors). */
export const newBenchCursorKeys = (): string => `1:${randomBytes(24).toString("base64")}`;

export async function startBenchStack(
  pool: Pool,
  databaseUrl: string,
  organizationId: string,
  cursorKeys: string = newBenchCursorKeys(),
): Promise<{ stack: RunningStack; apiKey: string; cursorKeys: string; exportAddress: string }> {
  const keyHashSecret = randomBytes(24).toString("base64url");
  const key = generateApiKey();
  await pool.query(
    "INSERT INTO api_keys (id, organization_id, secret_hash, description) VALUES ($1, $2, $3, 'bench')",
    [key.id, organizationId, hashApiKeySecret(key.secret, keyHashSecret)],
  );
  const [gateway, catalog, exportPort, schema] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const stack = await startStack({
    databaseUrl,
    redisUrl: process.env.REDIS_URL || undefined,
    keyHashSecret,
    cursorKeys,
    ports: { gateway, catalog, export: exportPort, schema },
    logLevel: "warn",
    // A fast full export of 1M rows is 200 requests in a few seconds: the per-minute budget (600 by
    // default) would stop the interleaved rounds, not measure them. Still counted, as in production.
    // Every resource dataset and deviations rendered, whatever the rows a (CI-sized) run generates.
    serviceEnv: { gateway: { RATE_LIMIT_PER_WINDOW: "1000000" }, schema: { RENDERED_DATASETS_MIN_ROWS: "0" } },
  });
  return { stack, apiKey: key.secret, cursorKeys, exportAddress: `127.0.0.1:${exportPort}` };
}

/**
 * Waits until the schema service has rendered each of `keys` (resource datasets, deviations) of the
 * organization into a current table (docs/export.md, "Rendered datasets"), as it does in production
 * before such a dataset's first backfill; a listing first, so the organization's registry exists.
 */
export async function awaitRendered(pool: Pool, baseUrl: string, apiKey: string, organizationId: string, keys: readonly string[], timeoutMs = 600_000): Promise<number> {
  const started = Date.now();
  const listing = await fetch(`${baseUrl}/v1/datasets`, { headers: { authorization: `Bearer ${apiKey}` } });
  if (!listing.ok) throw new Error(`listing before the render wait: HTTP ${listing.status}`);
  await listing.arrayBuffer();
  for (;;) {
    let pending = 0;
    for (const key of keys) {
      const entry = await loadRegistryEntry(pool, organizationId, key);
      const plan = entry ? await loadRenderedPlan(pool, organizationId, entry) : undefined;
      if (plan?.state.tableName === null) throw new Error(`${key} is not rendered: it has fewer rows than RENDERED_DATASETS_MIN_ROWS`);
      if (!entry || !plan?.current || !servesRendered(entry, plan.state)) pending++;
    }
    if (pending === 0) return (Date.now() - started) / 1000;
    if (Date.now() - started > timeoutMs) throw new Error(`${pending} of ${keys.join(", ")} not rendered after ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
