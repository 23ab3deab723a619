import { randomBytes, randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { seedDemo } from "@exportsvc/exportctl";
import { startStack, type RunningStack, type ServiceName } from "../../scripts/lib/stack";
import { createPool } from "@exportsvc/db";
import { testDatabaseUrl, testPool } from "./db";
import { freePort } from "./ports";

export interface E2E {
  pool: Pool;
  stack: RunningStack;
  baseUrl: string;
  apiKey: string;
  organizationId: string;
  keyHashSecret: string;
  /** GET with the demo key (or the given headers). */
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  /** Issues a key for an organization straight into the key store. */
  issueKey(organizationId: string, opts?: { expiresAt?: Date; revoked?: boolean }): Promise<{ id: string; secret: string }>;
  /** A new organization with a key; enabled unless told otherwise. */
  newOrganization(opts?: { enabled?: boolean }): Promise<{ organizationId: string; secret: string }>;
  /** Each service's Prometheus endpoint (`http://127.0.0.1:<METRICS_PORT>/metrics`). */
  metricsUrls: Record<ServiceName, string>;
  stop(): Promise<void>;
}

export interface E2EOptions {
  env?: Record<string, string>;
  serviceEnv?: Partial<Record<ServiceName, Record<string, string>>>;
  /** A database of the test's own (migrated), seeded and served instead of the run's. */
  databaseUrl?: string;
  /** Instead of REDIS_URL (e.g. a throwaway redis-server the test stops). */
  redisUrl?: string;
  /** How long the services may take to become ready (default 150 s). */
  startTimeoutMs?: number;
}

/** Seeds the demo organization into the run's database and starts the four services as processes. */
export async function startE2E(opts: E2EOptions = {}): Promise<E2E> {
  const keyHashSecret = randomBytes(16).toString("hex");
  const pool = opts.databaseUrl ? createPool({ connectionString: opts.databaseUrl, max: 4 }) : testPool();
  const demo = await seedDemo(pool, { keyHashSecret });
  // The demo organization may have been seeded by an earlier suite of this run with another secret.
  const demoKey = demo.secret ? { secret: demo.secret } : await issueKeyInto(pool, keyHashSecret, demo.organizationId);
  let metricsPorts!: Record<ServiceName, number>;
  const stack = await startWithFreshPorts(async () => {
    const ports = await Promise.all(Array.from({ length: 8 }, freePort));
    metricsPorts = { gateway: ports[4], catalog: ports[5], export: ports[6], schema: ports[7] };
    return startStack({
      databaseUrl: opts.databaseUrl ?? testDatabaseUrl(),
      redisUrl: opts.redisUrl ?? (process.env.REDIS_URL || undefined),
      keyHashSecret,
      cursorKeys: `7:${randomBytes(24).toString("base64")}`,
      ports: {
        gateway: ports[0],
        catalog: ports[1],
        export: ports[2],
        schema: ports[3],
        metrics: metricsPorts,
      },
      env: { RATE_LIMIT_PER_WINDOW: "100000", ...(opts.env ?? {}) },
      // Every resource dataset and deviations rendered however small (docs/export.md, "Rendered datasets"), so
      // end-to-end suites read rendered tables as well as live pages; a suite may still override.
      serviceEnv: { ...opts.serviceEnv, schema: { RENDERED_DATASETS_MIN_ROWS: "0", RENDERED_DATASETS_INTERVAL_MS: "200", ...opts.serviceEnv?.schema } },
      // Generous by default: four processes compiling TypeScript on a loaded machine; a service that fails exits first.
    }, opts.startTimeoutMs ?? 150_000);
  });
  const apiKey = demoKey.secret;
  return {
    pool,
    stack,
    baseUrl: stack.baseUrl,
    apiKey,
    organizationId: demo.organizationId,
    keyHashSecret,
    metricsUrls: Object.fromEntries(Object.entries(metricsPorts).map(([name, port]) => [name, `http://127.0.0.1:${port}/metrics`])) as Record<ServiceName, string>,
    get: (path, headers = {}) => fetch(`${stack.baseUrl}${path}`, { headers: { Authorization: `Bearer ${apiKey}`, ...headers } }),
    issueKey: (organizationId, o) => issueKeyInto(pool, keyHashSecret, organizationId, o),
    newOrganization: async (o = {}) => {
      const organizationId = randomUUID();
      await pool.query("INSERT INTO organizations (id, name) VALUES ($1, $2)", [organizationId, `Org ${organizationId.slice(0, 8)}`]);
      await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, $2)", [organizationId, o.enabled ?? true]);
      const { secret } = await issueKeyInto(pool, keyHashSecret, organizationId);
      return { organizationId, secret };
    },
    stop: async () => {
      await stack.stop();
      await pool.end();
    },
  };
}

async function issueKeyInto(pool: Pool, keyHashSecret: string, organizationId: string, o: { expiresAt?: Date; revoked?: boolean } = {}) {
  const key = generateApiKey();
  await pool.query(
    "INSERT INTO api_keys (id, organization_id, secret_hash, description, expires_at, revoked_at) VALUES ($1, $2, $3, 'test', $4, $5)",
    [key.id, organizationId, hashApiKeySecret(key.secret, keyHashSecret), o.expiresAt ?? null, o.revoked ? new Date() : null],
  );
  return key;
}

/** A port picked free can be taken by another process before a service binds it: try again with new ones. */
async function startWithFreshPorts(start: () => Promise<RunningStack>, attempts = 3): Promise<RunningStack> {
  for (let i = 1; ; i++) {
    try {
      return await start();
    } catch (err) {
      if (i >= attempts || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
}
