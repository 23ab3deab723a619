import type { ServiceName } from "../lib/stack";
import type { Cluster } from "./cluster";
import type { WatchingConsumer } from "./consumer";
import { Random } from "./random";

/**
 * The fault injector: a schedule drawn from the run's seed (the same seed gives the same faults at
 * the same offsets), played against the cluster while the generator and the consumer run.
 */
export type FaultKind =
  | "kill-gateway" | "kill-catalog" | "kill-export" | "kill-schema"
  | "kill-export-mid-stream" | "term-gateway" | "restart-postgres" | "redis-outage"
  | "proxy-latency" | "proxy-cut" | "kill-consumer-mid-page";

export const FAULT_KINDS: FaultKind[] = [
  "kill-gateway", "kill-catalog", "kill-export", "kill-schema", "kill-export-mid-stream", "term-gateway",
  "restart-postgres", "redis-outage", "proxy-latency", "proxy-cut", "kill-consumer-mid-page",
];

export interface ScheduledFault {
  atMs: number;
  kind: FaultKind;
  /** How long the fault lasts (latency, cut, Redis outage), ms. */
  durationMs: number;
  latencyMs?: number;
}

export interface InjectedFault extends ScheduledFault {
  startedAt: number;
  endedAt: number;
  /** Whether the fault hit its target (e.g. a page was in flight for a mid-page kill). */
  note?: string;
  error?: string;
}

/**
 * One fault every `meanGapMs` on average. Every kind appears once before any repeats (a shuffled
 * round), so a short run still covers all of them.
 */
export function faultSchedule(seed: number, runMs: number, meanGapMs: number, kinds: FaultKind[] = FAULT_KINDS): ScheduledFault[] {
  const rnd = Random.derived(seed, "faults");
  const out: ScheduledFault[] = [];
  let at = Math.min(5000, runMs / 10);
  let round: FaultKind[] = [];
  const stopAt = runMs - 5000;
  while (at < stopAt) {
    if (round.length === 0) round = rnd.shuffle(kinds);
    const kind = round.shift()!;
    const durationMs = kind === "proxy-latency" ? rnd.int(2000, 6000) : kind === "proxy-cut" || kind === "redis-outage" ? rnd.int(1000, 4000) : 0;
    out.push({ atMs: Math.round(at), kind, durationMs, ...(kind === "proxy-latency" ? { latencyMs: rnd.int(50, 400) } : {}) });
    at += meanGapMs * (0.5 + rnd.float());
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FaultInjector {
  readonly injected: InjectedFault[] = [];
  constructor(
    private readonly cluster: Cluster,
    private readonly consumers: WatchingConsumer[],
    private readonly log: (line: string) => void,
  ) {}

  /** Plays the schedule from `startedAt`; resolves when every fault has ended or `shouldStop` says so. */
  async run(schedule: ScheduledFault[], startedAt: number, shouldStop: () => boolean): Promise<void> {
    for (const fault of schedule) {
      const wait = startedAt + fault.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      if (shouldStop()) return;
      const begin = Date.now();
      const record: InjectedFault = { ...fault, startedAt: begin, endedAt: begin };
      try {
        record.note = await this.inject(fault);
      } catch (err) {
        record.error = (err as Error).message.slice(0, 500);
        this.log(`fault ${fault.kind} failed: ${record.error}`);
      }
      record.endedAt = Date.now();
      this.injected.push(record);
      this.log(`fault ${fault.kind} at +${Math.round((begin - startedAt) / 1000)}s (${record.endedAt - begin} ms)${record.note ? `: ${record.note}` : ""}`);
    }
  }

  private async killService(name: ServiceName, signal: NodeJS.Signals): Promise<void> {
    const child = this.cluster.stack.processes[name];
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
        child.once("exit", () => {
          clearTimeout(killer);
          resolve();
        });
        child.kill(signal);
      });
    }
    await this.cluster.stack.restart(name);
  }

  private async inject(fault: ScheduledFault): Promise<string | undefined> {
    const { cluster } = this;
    switch (fault.kind) {
      case "kill-gateway":
      case "kill-catalog":
      case "kill-export":
      case "kill-schema":
        await this.killService(fault.kind.slice(5) as ServiceName, "SIGKILL");
        return undefined;
      case "term-gateway":
        await this.killService("gateway", "SIGTERM");
        return undefined;
      case "kill-export-mid-stream": {
        const hit = await this.waitForPage(10_000);
        await this.killService("export", "SIGKILL");
        return hit ? "a page was in flight" : "no page started within 10 s; killed anyway";
      }
      case "kill-consumer-mid-page": {
        const consumer = this.consumers[0];
        if (!consumer) return "no consumer";
        const hit = await consumer.nextPage(10_000);
        await consumer.restart();
        return hit ? "killed while reading a page" : "no page started within 10 s; killed anyway";
      }
      case "restart-postgres":
        await cluster.restartPostgres();
        return undefined;
      case "redis-outage":
        if (!cluster.redisUrl) return "no own Redis (redis-server not installed): skipped";
        await cluster.stopRedis();
        await sleep(fault.durationMs);
        await cluster.startRedis();
        return undefined;
      case "proxy-latency":
        cluster.proxy.setLatency(fault.latencyMs ?? 100);
        await sleep(fault.durationMs);
        cluster.proxy.setLatency(0);
        return `${fault.latencyMs} ms each way`;
      case "proxy-cut":
        cluster.proxy.cut();
        await sleep(fault.durationMs);
        cluster.proxy.restore();
        return undefined;
    }
  }

  private async waitForPage(timeoutMs: number): Promise<boolean> {
    if (this.consumers.some((c) => c.inPage)) return true;
    if (this.consumers.length === 0) return false;
    return Promise.race(this.consumers.map((c) => c.nextPage(timeoutMs)));
  }
}
