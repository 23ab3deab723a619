/**
 * `npm start`: the whole service on one machine with only Node.
 * - DATABASE_URL unset → an embedded PostgreSQL under .data/pg (kept between starts);
 * - REDIS_URL unset → the gateway's in-process store;
 * - migrations, the demo organization and its data (idempotent), a demo API key;
 * - the four services as separate processes talking gRPC; prints the base URL and the demo key.
 * Every port comes from a variable (0 = any free port); all are checked before anything starts, and a
 * taken one is named with the process holding it. Ctrl-C or SIGTERM (also when sent to `npm start`:
 * the script is exec'd, so npm's `sh -c` does not stand in between) stops everything cleanly.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { createPool, migrate, startEmbeddedPostgres, type EmbeddedDatabase } from "@exportsvc/db";
import { seedDemo } from "@exportsvc/exportctl";
import { GATEWAY_HTTP_PORT, GRPC_PORT } from "@exportsvc/datasets/src/domain";
import { DEFAULT_METRICS_PORT, METRICS_PORT_ORDER, describePortOwner, freePort, portFromEnv, portIsFree } from "./lib/ports";
import { describeError, runAsScript } from "./lib/run-script";
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

class StartError extends Error {}

/** The commit checked out here, for GET /build (an image build stamps GIT_COMMIT instead); "unknown" outside git. */
function checkedOutCommit(): string {
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "unknown";
  }
}

interface PortPlan {
  variable: string;
  what: string;
  port: number;
}

/**
 * Resolves every port npm start needs: the variable's value, or a free port for 0. A port that is
 * taken stops the start before anything runs, naming the variable and the process that holds it.
 */
async function planPorts(embeddedPostgres: boolean): Promise<Record<string, number>> {
  const metricsBase = portFromEnv("METRICS_PORT", DEFAULT_METRICS_PORT);
  const wanted: PortPlan[] = [
    { variable: "PORT", what: "gateway HTTP", port: portFromEnv("PORT", GATEWAY_HTTP_PORT) },
    { variable: "CATALOG_GRPC_PORT", what: "catalog gRPC", port: portFromEnv("CATALOG_GRPC_PORT", GRPC_PORT.catalog) },
    { variable: "EXPORT_GRPC_PORT", what: "export gRPC", port: portFromEnv("EXPORT_GRPC_PORT", GRPC_PORT.export) },
    { variable: "SCHEMA_GRPC_PORT", what: "schema gRPC", port: portFromEnv("SCHEMA_GRPC_PORT", GRPC_PORT.schema) },
    ...METRICS_PORT_ORDER.map((service, i) => ({
      variable: "METRICS_PORT",
      what: `${service} metrics`,
      port: metricsBase === 0 ? 0 : metricsBase + i,
    })),
    ...(embeddedPostgres ? [{ variable: "EMBEDDED_PG_PORT", what: "embedded PostgreSQL", port: portFromEnv("EMBEDDED_PG_PORT", 54320) }] : []),
  ];
  const chosen = new Set<number>();
  const taken: string[] = [];
  for (const plan of wanted) {
    if (plan.port === 0) {
      let port = await freePort();
      while (chosen.has(port)) port = await freePort();
      plan.port = port;
    } else if (chosen.has(plan.port)) {
      taken.push(`port ${plan.port} (${plan.variable}, ${plan.what}) is also asked for by another service of this start`);
    } else if (!(await portIsFree(plan.port))) {
      const owner = describePortOwner(plan.port);
      taken.push(`port ${plan.port} (${plan.variable}, ${plan.what}) is taken by ${owner ?? "another process (could not tell which)"}`);
    }
    chosen.add(plan.port);
  }
  if (taken.length > 0) {
    throw new StartError(
      [...taken, "Set the variable to another port, or to 0 for any free port (METRICS_PORT is the first of four consecutive ports)."].join("\n"),
    );
  }
  return Object.fromEntries(wanted.map((p) => [p.what, p.port]));
}

// Signals that arrive during start-up stop it; the handlers below are replaced once everything runs.
const startup = new AbortController();
const interrupt = () => startup.abort();
process.on("SIGINT", interrupt);
process.on("SIGTERM", interrupt);

async function main(): Promise<void> {
  const state = loadDevState();
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = process.env.DATABASE_URL;
  const ports = await planPorts(!databaseUrl);
  if (!databaseUrl) {
    const port = ports["embedded PostgreSQL"];
    process.stdout.write(`DATABASE_URL is unset: starting an embedded PostgreSQL on port ${port}\n`);
    // The shutdown below stops the services first and the cluster last: the package must not stop it at the signal.
    embedded = await startEmbeddedPostgres(join(DATA_DIR, "pg"), port, undefined, { callerHandlesSignals: true }).catch((err: unknown) => {
      throw new StartError(`the embedded PostgreSQL (EMBEDDED_PG_PORT ${port}) did not start: ${describeError(err)}`);
    });
    process.stdout.write(`embedded PostgreSQL: data in ${relative(ROOT, embedded.dataDir).startsWith("..") ? embedded.dataDir : relative(ROOT, embedded.dataDir)}\n`);
    databaseUrl = embedded.url;
  }
  try {
    await startServices(state, databaseUrl, ports, embedded);
  } catch (err) {
    await embedded?.stop().catch(() => undefined);
    throw err;
  }
  // The stack runs until a signal or a service's exit stops it: that shutdown exits the process.
  return new Promise<never>(() => undefined);
}

async function startServices(state: DevState, databaseUrl: string, ports: Record<string, number>, embedded: EmbeddedDatabase | undefined): Promise<void> {
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

  if (startup.signal.aborted) throw new StartError("interrupted during start-up");
  const stack = await startStack(
    {
      databaseUrl,
      redisUrl: process.env.REDIS_URL || undefined,
      keyHashSecret,
      cursorKeys,
      output: "inherit",
      logLevel: process.env.LOG_LEVEL ?? "info",
      ports: {
        gateway: ports["gateway HTTP"],
        catalog: ports["catalog gRPC"],
        export: ports["export gRPC"],
        schema: ports["schema gRPC"],
        metrics: { gateway: ports["gateway metrics"], catalog: ports["catalog metrics"], export: ports["export metrics"], schema: ports["schema metrics"] },
      },
      // Every service's build_info and the gateway's GET /build name the commit checked out here.
      env: { GIT_COMMIT: process.env.GIT_COMMIT || checkedOutCommit() },
      signal: startup.signal,
    },
    120_000,
  );
  const metrics = (["gateway", "catalog", "export", "schema"] as const).map((s) => `${s} ${ports[`${s} metrics`]}`).join(", ");

  const key = state.demoKey?.secret ?? "(the demo key was issued earlier with another KEY_HASH_SECRET; issue one with npm run exportctl -- keys issue)";
  process.stdout.write(
    [
      "",
      "Dataset export service is running.",
      `  Base URL:     ${stack.baseUrl}`,
      `  Demo API key: ${key}`,
      `  API reference: ${stack.baseUrl}/docs`,
      `  Ports:        gateway HTTP ${ports["gateway HTTP"]}; gRPC catalog ${ports["catalog gRPC"]}, export ${ports["export gRPC"]}, schema ${ports["schema gRPC"]}; metrics ${metrics}` +
        (embedded ? `; embedded PostgreSQL ${ports["embedded PostgreSQL"]}` : ""),
      `  Processes:    ${Object.entries(stack.processes).map(([name, child]) => `${name} pid ${child.pid}`).join(", ")} (this one: pid ${process.pid})`,
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
  process.off("SIGINT", interrupt);
  process.off("SIGTERM", interrupt);
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  if (startup.signal.aborted) void shutdown();
  for (const child of Object.values(stack.processes)) {
    child.once("exit", (code, signal) => {
      if (!stopping) {
        process.stderr.write(`a service exited unexpectedly (${code ?? signal}); stopping the rest\n`);
        void shutdown();
      }
    });
  }
}

runAsScript(module, main, "npm start");
