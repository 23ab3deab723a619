import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * The consumer under test, behind one small interface so that switching is one flag:
 * - `minimal`: the simulator's STAND-IN loop of the loader rules (minimal-consumer.ts);
 * - `sync-client`: the reference client's `dataset-sync watch` / `dataset-sync sync`, spawned when
 *   `packages/sync-client` exists.
 * Both take the same environment: SYNC_TARGET (postgres://), EXPORT_BASE_URL, EXPORT_API_KEY.
 */
export type ConsumerKind = "minimal" | "sync-client";

export interface ConsumerTarget {
  targetUrl: string;
  baseUrl: string;
  apiKey: string;
  pageLimit: number;
}

export interface ConsumerEvent {
  event: string;
  dataset?: string;
  t: number;
}

const ROOT = join(__dirname, "..", "..");
const SYNC_CLIENT_CLI = process.env.SIMULATE_SYNC_CLIENT_CLI || join(ROOT, "packages", "sync-client", "src", "cli.ts");

export function consumerAvailable(kind: ConsumerKind): string | undefined {
  if (kind === "minimal") return undefined;
  return existsSync(SYNC_CLIENT_CLI) ? undefined : `--consumer sync-client needs ${SYNC_CLIENT_CLI} (packages/sync-client is not on this branch yet)`;
}

function command(kind: ConsumerKind, mode: "watch" | "once", pageLimit: number): string[] {
  if (kind === "minimal") return ["--import", "tsx", join(__dirname, "minimal-consumer.ts"), mode];
  // The reference client: `watch` polls until killed; one catch-up pass is `sync`.
  const global = ["--limit", String(pageLimit), "--json"];
  return ["--import", "tsx", SYNC_CLIENT_CLI, ...global, ...(mode === "watch" ? ["watch", "--interval", "1s"] : ["sync"])];
}

function env(t: ConsumerTarget): NodeJS.ProcessEnv {
  return { ...process.env, SYNC_TARGET: t.targetUrl, EXPORT_BASE_URL: t.baseUrl, EXPORT_API_KEY: t.apiKey, SYNC_PAGE_LIMIT: String(t.pageLimit) };
}

/** A consumer in watch mode, restarted by the simulator after a kill. */
export class WatchingConsumer {
  child?: ChildProcess;
  inPage = false;
  readonly output: string[] = [];
  private stopping = false;
  private pageWaiters: (() => void)[] = [];
  restarts = 0;
  /** Exits nobody asked for (a defect of the consumer): it is started again, and the run reports them. */
  unexpectedExits = 0;
  /** The reference client's own JSON events, counted (the stand-in keeps its counters in its target). */
  readonly counters: Record<string, number> = {};

  constructor(readonly kind: ConsumerKind, readonly target: ConsumerTarget, private readonly log: (line: string) => void) {}

  start(): void {
    const child = spawn(process.execPath, command(this.kind, "watch", this.target.pageLimit), { cwd: ROOT, env: env(this.target), stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    let buffer = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const e = JSON.parse(line) as ConsumerEvent & { rows?: number; status?: number; swept?: number; tombstoned?: number; trimmed?: number };
          if (this.kind === "sync-client") this.count(e);
          if (e.event === "page-start") {
            this.inPage = true;
            for (const w of this.pageWaiters.splice(0)) w();
          } else if (e.event === "page-end") this.inPage = false;
        } catch {
          this.keep(line);
        }
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => this.keep(chunk.toString("utf8")));
    child.once("exit", (code, signal) => {
      this.inPage = false;
      if (!this.stopping && !this.killing) {
        this.unexpectedExits++;
        this.log(`consumer exited on its own (${code ?? signal}): ${this.output.slice(-5).join(" ").slice(-1500)}`);
        setTimeout(() => {
          if (!this.stopping && this.child === child) this.start();
        }, 1000);
      }
    });
  }

  private count(e: { event: string; rows?: number; status?: number; swept?: number; tombstoned?: number; trimmed?: number; reason?: string }): void {
    const add = (k: string, n = 1) => (this.counters[k] = (this.counters[k] ?? 0) + n);
    if (e.event === "page") {
      add("pages");
      add("rows", e.rows ?? 0);
    } else if (e.event === "retry") {
      add("retries");
      if (e.status === 429) add("rateLimited");
    } else if (e.event === "page-retry") {
      add("retries");
      add("abortedStreams");
    } else if (e.event === "full-read") {
      add("fullReads");
      // Counted by reason too, so a run shows whether any full read came from a rename (issue 31).
      add(`fullReads: ${e.reason ?? "unknown"}`);
    }
    else if (e.event === "dataset-done") {
      add("tombstoned", e.tombstoned ?? 0);
      add("swept", e.swept ?? 0);
    } else if (e.event === "dataset-error") add("datasetErrors");
  }

  private keep(text: string): void {
    this.output.push(text);
    if (this.output.length > 200) this.output.splice(0, 100);
  }

  /** Resolves at the next page start (or after timeoutMs). */
  nextPage(timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.pageWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private killing = false;

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.killing = true;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill(signal);
    });
    this.killing = false;
  }

  async restart(): Promise<void> {
    await this.kill("SIGKILL");
    this.restarts++;
    this.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.kill("SIGTERM");
  }
}

/** One catch-up pass to the end of every dataset (the verdict's final incremental sync and its full export). */
export function syncOnce(kind: ConsumerKind, target: ConsumerTarget, timeoutMs: number): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, command(kind, "once", target.pageLimit), { cwd: ROOT, env: env(target), stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-4000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, output: signal ? `killed (${signal}) after ${timeoutMs} ms\n${stderr}` : stderr });
    });
  });
}
