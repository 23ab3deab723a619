import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { connect } from "node:net";

/**
 * Starts the four services as separate processes talking gRPC (used by `npm start`, the end-to-end
 * tests and the benchmark). Each runs its TypeScript entry point through tsx.
 */
export interface StackPorts {
  gateway: number;
  catalog: number;
  export: number;
  schema: number;
  metrics?: { gateway: number; catalog: number; export: number; schema: number };
}

export interface StackOptions {
  databaseUrl: string;
  redisUrl?: string;
  keyHashSecret: string;
  cursorKeys: string;
  ports: StackPorts;
  /** Extra variables for every service (or per service). */
  env?: Record<string, string>;
  serviceEnv?: Partial<Record<ServiceName, Record<string, string>>>;
  /** Where service output goes: inherit (npm start), or collected (tests). */
  output?: "inherit" | "collect";
  logLevel?: string;
  /** Aborting it during start-up stops the services started so far (npm start's SIGTERM). */
  signal?: AbortSignal;
}

export type ServiceName = "schema" | "catalog" | "export" | "gateway";
const ORDER: ServiceName[] = ["schema", "catalog", "export", "gateway"];

export interface RunningStack {
  baseUrl: string;
  ports: StackPorts;
  processes: Record<ServiceName, ChildProcess>;
  logs: Record<ServiceName, string[]>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts one service again with the environment it was first given (after a kill); resolves when it accepts connections. */
  restart(name: ServiceName, timeoutMs?: number): Promise<void>;
}

const ROOT = join(__dirname, "..", "..");

function serviceEnv(name: ServiceName, opts: StackOptions): Record<string, string> {
  const p = opts.ports;
  const common: Record<string, string> = {
    DATABASE_URL: opts.databaseUrl,
    LOG_LEVEL: opts.logLevel ?? "warn",
    GRPC_HOST: "127.0.0.1",
    SCHEMA_ADDRESS: `127.0.0.1:${p.schema}`,
    CATALOG_ADDRESS: `127.0.0.1:${p.catalog}`,
    EXPORT_ADDRESS: `127.0.0.1:${p.export}`,
    KEY_HASH_SECRET: opts.keyHashSecret,
    CURSOR_KEYS: opts.cursorKeys,
  };
  if (p.metrics) common.METRICS_PORT = String(p.metrics[name]);
  if (opts.redisUrl) common.REDIS_URL = opts.redisUrl;
  const own: Record<string, string> =
    name === "gateway" ? { PORT: String(p.gateway), HOST: "127.0.0.1" } : { GRPC_PORT: String(p[name]) };
  return { ...common, ...own, ...(opts.env ?? {}), ...(opts.serviceEnv?.[name] ?? {}) };
}

/**
 * V8 flags each service runs with, here and in its image's CMD (the Dockerfile tests compare them;
 * docs/deployment.md, "Node flags").
 * --heap-growing-percent=100 (gateway, export, schema): after each full GC the old generation may
 * grow to twice its live size. V8 counts external memory (the Buffers a streamed page passes
 * through) allocated since the last full GC against that headroom; with its own factor (1.4 here) a
 * process that streams ~100 MB/s could start a full GC every ~100 ms and keep doing so, tripling the
 * gateway's CPU per byte.
 * --max-semi-space-size=4 (catalog): it answers small requests and allocates slowly, and with V8's
 * default it grew its young generation in steps for the first quarter of an hour of a soak and kept
 * it, so its resident memory rose by a fifth; with the flag its old generation also grew to twice
 * its live size over 25 minutes, so the catalog runs without it.
 */
const HEAP_GROWTH_FLAGS: readonly string[] = ["--heap-growing-percent=100"];
export const SERVICE_NODE_FLAGS: Readonly<Record<ServiceName, readonly string[]>> = {
  gateway: HEAP_GROWTH_FLAGS,
  export: HEAP_GROWTH_FLAGS,
  schema: HEAP_GROWTH_FLAGS,
  catalog: ["--max-semi-space-size=4"],
};

export function spawnService(name: ServiceName, env: Record<string, string>, output: "inherit" | "collect", logs: string[]): ChildProcess {
  // As in the images: the service's tracing preloaded before its main (docs/observability.md).
  const src = join(ROOT, "services", name, "src");
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS[name], "--import", "tsx", "--import", join(src, "tracing.ts"), join(src, "main.ts")], {
    cwd: ROOT,
    env: { ...process.env, ...env, NODE_ENV: process.env.NODE_ENV ?? "development" },
    stdio: output === "inherit" ? ["ignore", "inherit", "inherit"] : ["ignore", "pipe", "pipe"],
  });
  if (output === "collect") {
    const keep = (chunk: Buffer) => {
      logs.push(chunk.toString("utf8"));
      if (logs.length > 500) logs.splice(0, logs.length - 500);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
  }
  return child;
}

export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function waitForReady(
  ports: StackPorts,
  baseUrl: string,
  processes: Record<ServiceName, ChildProcess>,
  logs: Record<ServiceName, string[]>,
  timeoutMs: number,
  signal?: AbortSignal,
) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    if (signal?.aborted) throw new Error("interrupted during start-up");
    for (const name of ORDER) {
      const child = processes[name];
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) during start-up:\n${logs[name].join("").slice(-4000)}`);
      }
    }
    try {
      const internal = await Promise.all([ports.schema, ports.catalog, ports.export].map(accepts));
      const res = await fetch(`${baseUrl}/health/ready`);
      if (res.ok && internal.every(Boolean)) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`gateway not ready after ${timeoutMs} ms (${last})`);
}

export async function startStack(opts: StackOptions, timeoutMs = 60_000): Promise<RunningStack> {
  const output = opts.output ?? "collect";
  const logs = { schema: [], catalog: [], export: [], gateway: [] } as Record<ServiceName, string[]>;
  const processes = {} as Record<ServiceName, ChildProcess>;
  for (const name of ORDER) processes[name] = spawnService(name, serviceEnv(name, opts), output, logs[name]);
  const baseUrl = `http://127.0.0.1:${opts.ports.gateway}`;
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    await Promise.all(
      ORDER.slice().reverse().map(
        (name) =>
          new Promise<void>((resolve) => {
            const child = processes[name];
            if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
            const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
            child.once("exit", () => {
              clearTimeout(killer);
              resolve();
            });
            child.kill(signal);
          }),
      ),
    );
  };
  const restart = async (name: ServiceName, restartTimeoutMs = 60_000) => {
    const old = processes[name];
    if (old && old.exitCode === null && old.signalCode === null) {
      await new Promise<void>((resolve) => {
        old.once("exit", () => resolve());
        old.kill("SIGKILL");
      });
    }
    const child = spawnService(name, serviceEnv(name, opts), output, logs[name]);
    processes[name] = child;
    const port = name === "gateway" ? opts.ports.gateway : opts.ports[name];
    const deadline = Date.now() + restartTimeoutMs;
    while (!(await accepts(port))) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) on restart:\n${logs[name].join("").slice(-4000)}`);
      }
      if (Date.now() > deadline) throw new Error(`${name} did not accept connections within ${restartTimeoutMs} ms of a restart`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  try {
    await waitForReady(opts.ports, baseUrl, processes, logs, timeoutMs, opts.signal);
  } catch (err) {
    await stop(opts.signal?.aborted ? "SIGTERM" : "SIGKILL");
    throw err;
  }
  return { baseUrl, ports: opts.ports, processes, logs, stop, restart };
}
