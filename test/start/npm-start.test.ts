/**
 * `npm start` as users run it (through npm and its `sh -c`): every port from a variable or chosen free
 * and printed, a taken port named with the process that holds it, and SIGTERM sent to the npm process
 * stopping every process it started.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { testDatabaseUrl } from "../support/db";
import { procStatFields } from "../../scripts/lib/proc-stat";

const ROOT = join(__dirname, "..", "..");
const START_TIMEOUT = 240_000;

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function npmStart(env: Record<string, string | undefined>): Started {
  const full: Record<string, string | undefined> = {
    ...process.env,
    LOG_LEVEL: "warn",
    KEY_HASH_SECRET: randomBytes(16).toString("hex"),
    CURSOR_KEYS: `3:${randomBytes(24).toString("base64")}`,
    ...env,
  };
  for (const [k, v] of Object.entries(full)) if (v === undefined) delete full[k];
  const child = spawn("npm", ["start"], { cwd: ROOT, env: full as NodeJS.ProcessEnv, stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  child.stdout!.on("data", (c: Buffer) => (text += c.toString("utf8")));
  child.stderr!.on("data", (c: Buffer) => (text += c.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => text, exited };
}

async function until(what: string, probe: () => boolean, timeoutMs: number, started: Started): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${started.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Every live descendant of a process (from /proc). */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = procStatFields(Number(entry));
    if (fields) parent.set(Number(entry), Number(fields[1])); // else exited meanwhile
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, ppid] of parent) if (ppid === pid) (found.push(child), walk(child));
  };
  walk(root);
  return found;
}

const alive = (pid: number) => {
  const state = procStatFields(pid)?.[0];
  return state !== undefined && state !== "Z";
};

function listen(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

describe("npm start", () => {
  test("with every port 0: free ports are chosen and printed, METRICS_PORT honoured, and SIGTERM to npm stops every child", async () => {
    const started = npmStart({
      DATABASE_URL: testDatabaseUrl(),
      PORT: "0",
      CATALOG_GRPC_PORT: "0",
      EXPORT_GRPC_PORT: "0",
      SCHEMA_GRPC_PORT: "0",
      METRICS_PORT: "0",
      GIT_COMMIT: undefined,
    });
    try {
      await until("the start banner", () => started.output().includes("Press Ctrl-C to stop."), START_TIMEOUT, started);
      const text = started.output();
      const baseUrl = /Base URL:\s+(\S+)/.exec(text)![1];
      const ports = /Ports:\s+gateway HTTP (\d+); gRPC catalog (\d+), export (\d+), schema (\d+); metrics gateway (\d+), catalog (\d+), export (\d+), schema (\d+)/.exec(text);
      expect(ports).not.toBeNull();
      const numbers = ports!.slice(1).map(Number);
      expect(new Set(numbers).size).toBe(8);
      expect(baseUrl).toBe(`http://127.0.0.1:${numbers[0]}`);
      expect((await fetch(`${baseUrl}/health`)).status).toBe(200);
      // GIT_COMMIT unset: /build reports the commit checked out.
      const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
      expect(((await (await fetch(`${baseUrl}/build`)).json()) as { commit: string }).commit).toBe(head);
      for (const metricsPort of numbers.slice(4)) {
        const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
        expect(res.status).toBe(200);
        await res.text();
      }

      const tree = descendants(started.child.pid!);
      // node (start.ts) and the four services at least: npm's `sh -c` is exec'd away.
      expect(tree.length).toBeGreaterThanOrEqual(5);
      started.child.kill("SIGTERM");
      expect(await started.exited).toBe(0);
      await until("every child to exit", () => tree.every((pid) => !alive(pid)), 60_000, started);
      expect(started.output()).toContain("stopped");
      await expect(fetch(`${baseUrl}/health`)).rejects.toThrow();
    } finally {
      if (started.child.exitCode === null) started.child.kill("SIGKILL");
    }
  }, START_TIMEOUT + 60_000);

  test("a taken port stops the start before anything runs, naming the variable and the process holding it", async () => {
    const taken = await listen();
    try {
      const gateway = npmStart({ DATABASE_URL: testDatabaseUrl(), PORT: String(taken.port), METRICS_PORT: "0" });
      expect(await gateway.exited).toBe(1);
      expect(gateway.output()).toContain(`port ${taken.port} (PORT, gateway HTTP) is taken by pid ${process.pid} (`);
      expect(gateway.output()).not.toContain("undefined");

      // The embedded PostgreSQL's port (DATABASE_URL unset), checked before the server is started.
      const embedded = npmStart({ DATABASE_URL: undefined, EMBEDDED_PG_PORT: String(taken.port), PORT: "0", METRICS_PORT: "0" });
      expect(await embedded.exited).toBe(1);
      expect(embedded.output()).toContain(`port ${taken.port} (EMBEDDED_PG_PORT, embedded PostgreSQL) is taken by pid ${process.pid} (`);
      expect(embedded.output()).not.toContain("starting an embedded PostgreSQL");

      const invalid = npmStart({ DATABASE_URL: testDatabaseUrl(), METRICS_PORT: "nine" });
      expect(await invalid.exited).toBe(1);
      expect(invalid.output()).toContain("METRICS_PORT must be a TCP port");
    } finally {
      taken.server.close();
    }
  }, START_TIMEOUT);
});
