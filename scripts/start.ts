/**
 * `npm start`: the whole service on one machine with only Node.
 * - DATABASE_URL unset → an embedded PostgreSQL under .data/pg (kept between starts);
 * - REDIS_URL unset → the gateway's in-process store;
 * - migrations, the demo organization and its data (idempotent), a demo API key;
 * - the four services as separate processes talking gRPC; prints the base URL and the demo key.
 * Ctrl-C stops everything cleanly.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createPool, migrate, startEmbeddedPostgres, type EmbeddedDatabase } from "@exportsvc/db";
import { seedDemo } from "@exportsvc/exportctl";
import { startStack } from "./lib/stack";

const ROOT = join(__dirname, "..");
const DATA_DIR = join(ROOT, ".data");

interface DevState {
  keyHashSecret: string;
  cursorKeys: string;
  demoKey?: { id: string; secret: string; organizationId: string };
}

function loadDevState(): DevState {
  const file = join(DATA_DIR, "dev-state.json");
  if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as DevState;
  const state: DevState = {
    keyHashSecret: randomBytes(32).toString("base64url"),
    cursorKeys: `1:${randomBytes(32).toString("base64url")}`,
  };
  saveDevState(state);
  return state;
}

function saveDevState(state: DevState): void {
  mkdirSync(DATA_DIR, { recursive: true });
  writeFileSync(join(DATA_DIR, "dev-state.json"), JSON.stringify(state, null, 2), { mode: 0o600 });
}

const portFromEnv = (name: string, def: number) => {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535) {
    process.stderr.write(`${name} must be a TCP port (1-65535), got '${raw}'\n`);
    process.exit(1);
  }
  return n;
};

async function main(): Promise<void> {
  const state = loadDevState();
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const port = portFromEnv("EMBEDDED_PG_PORT", 54320);
    process.stdout.write(`DATABASE_URL is unset: starting an embedded PostgreSQL on port ${port} (data in .data/pg)\n`);
    embedded = await startEmbeddedPostgres(join(DATA_DIR, "pg"), port);
    databaseUrl = embedded.url;
  }
  const keyHashSecret = process.env.KEY_HASH_SECRET || state.keyHashSecret;
  const cursorKeys = process.env.CURSOR_KEYS || state.cursorKeys;

  const pool = createPool({ connectionString: databaseUrl, max: 2 });
  try {
    await migrate(pool, (m) => process.stdout.write(`${m}\n`));
    const demo = await seedDemo(pool, { keyHashSecret });
    if (demo.secret) {
      state.demoKey = { id: demo.keyId, secret: demo.secret, organizationId: demo.organizationId };
      if (!process.env.KEY_HASH_SECRET) saveDevState(state);
    }
  } finally {
    await pool.end();
  }

  const gatewayPort = portFromEnv("PORT", 8080);
  const stack = await startStack(
    {
      databaseUrl,
      redisUrl: process.env.REDIS_URL || undefined,
      keyHashSecret,
      cursorKeys,
      output: "inherit",
      logLevel: process.env.LOG_LEVEL ?? "info",
      ports: {
        gateway: gatewayPort,
        catalog: portFromEnv("CATALOG_GRPC_PORT", 50052),
        export: portFromEnv("EXPORT_GRPC_PORT", 50053),
        schema: portFromEnv("SCHEMA_GRPC_PORT", 50054),
        metrics: { gateway: 9464, catalog: 9465, export: 9466, schema: 9467 },
      },
    },
    120_000,
  );

  const key = state.demoKey?.secret ?? "(the demo key was issued earlier with another KEY_HASH_SECRET; issue one with npm run exportctl -- keys issue)";
  process.stdout.write(
    [
      "",
      "Dataset export service is running.",
      `  Base URL:     ${stack.baseUrl}`,
      `  Demo API key: ${key}`,
      "",
      "Try:",
      `  curl -H "Authorization: Bearer ${key}" ${stack.baseUrl}/v1/datasets`,
      `  curl -H "Authorization: Bearer ${key}" "${stack.baseUrl}/v1/datasets/resources_suppliers/csv?limit=5"`,
      "",
      "Press Ctrl-C to stop.",
      "",
    ].join("\n"),
  );

  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write("\nstopping services...\n");
    await stack.stop("SIGTERM");
    if (embedded) await embedded.stop();
    process.stdout.write("stopped\n");
    process.exit(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  for (const child of Object.values(stack.processes)) {
    child.once("exit", (code, signal) => {
      if (!stopping) {
        process.stderr.write(`a service exited unexpectedly (${code ?? signal}); stopping the rest\n`);
        void shutdown();
      }
    });
  }
}

main().catch((err) => {
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
