import { sleep } from "../../packages/sync-client/src/api/client";
import { ExportApiClient, openTarget, SyncEngine, type RunSummary, type SyncEvent, type Target } from "../../packages/sync-client/src";

/**
 * One organization's consumer, in this process: the reference client's engine (`SyncEngine`, what
 * `dataset-sync watch` runs) polling the listing with the ETag it stored (If-None-Match) every
 * `pollMs` (±25 %) and syncing the datasets whose changeToken moved into its own PostgreSQL copy.
 *
 * Like `dataset-sync watch`, a consumer keeps its copy open between passes (its writer lock and its
 * pool's connections, on the consumers' own PostgreSQL: ./consumer-postgres.ts); a pass that failed
 * closes it, and the next opens it again. Hundreds of consumers share one process: at most `gate`
 * passes run at once (a pass that waits counts as late, below).
 */
export interface ConsumerCounters {
  passes: number;
  notModified: number;
  modified: number;
  pages: number;
  rows: number;
  retries: number;
  datasetErrors: number;
  passErrors: number;
  /** Passes that started more than one poll interval late (waiting for the gate). */
  latePasses: number;
}

export class Gate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly size: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.size) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/** Waits `ms` or until `signal` aborts (the client's wait, which rejects on abort). */
const pause = (ms: number, signal: AbortSignal) => sleep(ms, signal).catch(() => undefined);

export interface SoakConsumerOptions {
  organizationId: string;
  baseUrl: string;
  apiKey: string;
  copyUrl: string;
  pollMs: number;
  pageLimit: number;
  gate: Gate;
  random: () => number;
  log: (line: string) => void;
}

export class SoakConsumer {
  readonly counters: ConsumerCounters = { passes: 0, notModified: 0, modified: 0, pages: 0, rows: 0, retries: 0, datasetErrors: 0, passErrors: 0, latePasses: 0 };
  readonly errors: string[] = [];
  private readonly stop = new AbortController();
  private readonly client: ExportApiClient;
  private loop?: Promise<void>;
  /** The copy, open between passes (undefined: the next pass opens it). */
  private copy?: Promise<Target>;

  constructor(private readonly o: SoakConsumerOptions) {
    this.client = new ExportApiClient({
      baseUrl: o.baseUrl,
      apiKey: o.apiKey,
      userAgent: "soak",
      signal: this.stop.signal,
      onRetry: () => void this.counters.retries++,
    });
  }

  start(): void {
    this.loop = (async () => {
      // Spread the first polls over one interval so the consumers do not poll in step.
      await pause(this.o.random() * this.o.pollMs, this.stop.signal);
      while (!this.stop.signal.aborted) {
        const due = Date.now();
        await this.o.gate.run(async () => {
          if (this.stop.signal.aborted) return;
          if (Date.now() - due > this.o.pollMs) this.counters.latePasses++;
          await this.pass(this.stop.signal).catch((err: Error) => {
            if (this.stop.signal.aborted) return;
            this.counters.passErrors++;
            this.keepError(`pass: ${err.message}`);
          });
        });
        await pause(this.o.pollMs * (0.75 + this.o.random() / 2), this.stop.signal);
      }
    })();
  }

  private keepError(message: string): void {
    if (this.errors.length < 20) this.errors.push(message);
  }

  /**
   * One pass of the engine (listing, then what moved) into the consumer's copy, or, given
   * `targetUrl`, into that database, opened for this pass alone; `signal` stops it between pages.
   */
  async pass(signal?: AbortSignal, pageLimit = this.o.pageLimit, targetUrl?: string): Promise<RunSummary> {
    if (targetUrl !== undefined) {
      const target = await openWriter(targetUrl);
      try {
        return await this.passInto(target, pageLimit, signal);
      } finally {
        await target.close();
      }
    }
    this.copy ??= openWriter(this.o.copyUrl);
    try {
      return await this.passInto(await this.copy, pageLimit, signal);
    } catch (err) {
      await this.closeCopy();
      throw err;
    }
  }

  private async passInto(target: Target, pageLimit: number, signal?: AbortSignal): Promise<RunSummary> {
    const engine = new SyncEngine(this.client, target, { limit: pageLimit, signal, onEvent: (e) => this.count(e) });
    const summary = await engine.runOnce();
    this.counters.passes++;
    if (summary.listing === "not-modified") this.counters.notModified++;
    else this.counters.modified++;
    return summary;
  }

  private async closeCopy(): Promise<void> {
    const copy = this.copy;
    this.copy = undefined;
    await copy?.then((t) => t.close()).catch(() => undefined);
  }

  private count(e: SyncEvent): void {
    if (e.event === "page") {
      this.counters.pages++;
      this.counters.rows += e.rows;
    } else if (e.event === "dataset-error") {
      this.counters.datasetErrors++;
      this.keepError(`${e.dataset}: ${e.message}`);
    }
  }

  /** Stops polling (a pass in progress finishes its page and commits). */
  async halt(): Promise<void> {
    this.stop.abort();
    await this.loop;
  }

  async close(): Promise<void> {
    await this.halt();
    await this.closeCopy();
    await this.client.close();
  }
}

/** A target opened as its writer; closed again if opening fails. */
async function openWriter(url: string): Promise<Target> {
  const target = openTarget(url);
  try {
    await target.open({ writer: true });
    return target;
  } catch (err) {
    await target.close().catch(() => undefined);
    throw err;
  }
}
