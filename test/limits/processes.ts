import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { freePort } from "../support/ports";
import { join } from "node:path";
import { createClient } from "redis";

const ROOT = join(__dirname, "..", "..");

export interface Replica {
  baseUrl: string;
  process: ChildProcess;
  output: string[];
}

/** Starts one limited-server.ts process and waits for its port. */
export function startReplica(env: Record<string, string>, timeoutMs = 30_000): Promise<Replica> {
  const child = spawn(process.execPath, ["--import", "tsx", join(__dirname, "limited-server.ts")], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`replica did not start within ${timeoutMs} ms:\n${output.join("")}`));
    }, timeoutMs);
    child.stderr!.on("data", (chunk: Buffer) => output.push(chunk.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      output.push(text);
      const match = /LISTENING (\d+)/.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve({ baseUrl: `http://127.0.0.1:${match[1]}`, process: child, output });
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`replica exited (${code ?? signal}) during start-up:\n${output.join("")}`));
    });
  });
}

export function stopReplica(replica: Replica, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  const child = replica.process;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

export interface TestRedis {
  url: string;
  /** Where the URL came from, for test titles. */
  origin: string;
  stop(): Promise<void>;
}

/**
 * REDIS_URL when set (CI); otherwise a throwaway redis-server on a free port, which fails with a
 * clear message when redis-server is not installed (these tests need a real shared Redis).
 */
export async function testRedis(): Promise<TestRedis> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, origin: "REDIS_URL", stop: async () => undefined };
  if (spawnSync("redis-server", ["--version"]).error) {
    throw new Error("the multi-process limits test needs Redis: set REDIS_URL or install redis-server");
  }
  const port = await freePort();
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  const url = `redis://127.0.0.1:${port}`;
  const client = createClient({ url, socket: { reconnectStrategy: 50 } });
  client.on("error", () => undefined);
  await client.connect();
  await client.ping();
  await client.close();
  return {
    url,
    origin: "a throwaway redis-server (REDIS_URL unset)",
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
