import { randomBytes } from "node:crypto";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
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
    serviceEnv: { gateway: { RATE_LIMIT_PER_WINDOW: "1000000" } },
  });
  return { stack, apiKey: key.secret, cursorKeys, exportAddress: `127.0.0.1:${exportPort}` };
}
