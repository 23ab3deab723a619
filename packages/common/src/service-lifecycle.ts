import { buildIdentity, type BuildConfig, type BuildIdentity } from "./build-info";
import type { Logger } from "./logger";
import { startMetricsServer, type MetricsOptions, type MetricsServer, type PoolLike, type ServiceMetrics } from "./metrics";

/** The part of a service's configuration its lifecycle reads (the gateway's and every gRPC service's). */
export type LifecycleSettings = BuildConfig & {
  /** Port of /metrics; unset: no metrics server. */
  METRICS_PORT?: number;
  /** How long work in flight may run on after a stop starts before it is cut. */
  SHUTDOWN_GRACE_MS: number;
};

/** What a service answers on: the gateway's HTTP server, a gRPC server. */
export interface ServiceListener {
  /** Binds; resolves with what the "listening" log line shows of it (port, url). */
  listen(): Promise<Record<string, unknown>>;
  /** Stops accepting, lets the work in flight finish for up to graceMs, then cuts what is left. */
  drain(graceMs: number): Promise<void>;
  /** After a failed start: closes at once. */
  abort(): void;
}

/** Work that runs beside the listener (queues, maintenance loops), started once it is bound. */
export interface BackgroundWork {
  stop(): Promise<void>;
}

/** A database pool the service holds: observed by the metrics, ended after everything that uses it. */
export type ServicePool = PoolLike & { end(): Promise<void> };

export interface ServiceLifecycleOptions<M extends ServiceMetrics> {
  /** For the log lines "<name> listening" and "<name> stopped". */
  name: string;
  log: Logger;
  settings: LifecycleSettings;
  /** Where /metrics binds: the host the service itself listens on. */
  host: string;
  /** Builds the service's metrics (its own families beside the shared ones). */
  createMetrics(options: MetricsOptions): M;
}

export interface StartSteps {
  listener: ServiceListener;
  /** Started once the listener is bound and /metrics is up; stopped after the drain. */
  startBackgroundWork?(): Promise<BackgroundWork | undefined>;
  /** Called once everything has started: the service may now report itself ready. */
  ready?(): void;
}

export interface StartedService {
  /** Port of /metrics when METRICS_PORT is set. */
  metricsPort?: number;
  /** Graceful and idempotent (the same promise every time). */
  stop(): Promise<void>;
}

/**
 * The one start/stop lifecycle of every service (the gateway's `start` and the gRPC services'
 * `startGrpcService` both run on it; `runService` turns signals into `stop`). The build is read once
 * from the configuration and given to the metrics; what the service wires is handed to the lifecycle
 * as it is made (`holdPool`, `hold`), so a failed start releases it and a stop releases it in one
 * order: stop accepting and drain for SHUTDOWN_GRACE_MS, background work, what the service holds
 * (clients, stores: the last held first), the pool, then /metrics (scrapable until the end).
 * A step that fails is logged and the stop goes on; the stop then rejects with the first failure.
 */
export class ServiceLifecycle<M extends ServiceMetrics = ServiceMetrics> {
  readonly build: BuildIdentity;
  readonly metrics: M;
  private readonly held: Array<() => unknown> = [];
  private readonly pools: ServicePool[] = [];
  private listener?: ServiceListener;
  private background?: BackgroundWork;
  private metricsServer?: MetricsServer;
  private stopping?: Promise<void>;

  constructor(private readonly options: ServiceLifecycleOptions<M>) {
    this.build = buildIdentity(options.settings);
    this.metrics = options.createMetrics({ build: this.build });
  }

  /** The service's database pool: its connection counts on /metrics (pool="main"), ended after what it holds. */
  holdPool<P extends ServicePool>(pool: P): P {
    this.metrics.observePool(pool, "main");
    this.pools.push(pool);
    return pool;
  }

  /** Something the service holds besides its pool (a client, a store); `close` runs after the background work. */
  hold(close: () => unknown): void {
    this.held.push(close);
  }

  /** Binds the listener, serves /metrics, starts the background work; after a failure, releases everything and rethrows. */
  async start(steps: StartSteps): Promise<StartedService> {
    const { settings, host, log, name } = this.options;
    let where: Record<string, unknown>;
    try {
      this.listener = steps.listener;
      where = await steps.listener.listen();
      if (settings.METRICS_PORT !== undefined) this.metricsServer = await startMetricsServer(settings.METRICS_PORT, this.metrics.registry, host);
      this.background = await steps.startBackgroundWork?.();
    } catch (err) {
      steps.listener.abort();
      this.stopping = this.release((what, failure) => log.warn({ err: failure }, `failed start: ${what} failed`));
      await this.stopping;
      throw err;
    }
    steps.ready?.();
    log.info({ ...where, metricsPort: this.metricsServer?.port, build: this.build }, `${name} listening`);
    return { metricsPort: this.metricsServer?.port, stop: () => this.stop() };
  }

  stop(): Promise<void> {
    return (this.stopping ??= this.shutDown());
  }

  private async shutDown(): Promise<void> {
    const failures: unknown[] = [];
    const onFailure = (what: string, err: unknown) => {
      failures.push(err);
      this.options.log.warn({ err }, `stop: ${what} failed`);
    };
    await attempt("drain", () => this.listener?.drain(this.options.settings.SHUTDOWN_GRACE_MS), onFailure);
    await attempt("background work", () => this.background?.stop(), onFailure);
    await this.release(onFailure);
    this.options.log.info(`${this.options.name} stopped`);
    if (failures.length > 0) throw failures[0];
  }

  /** What a stop and a failed start both release, in that order; every step runs. */
  private async release(onFailure: (what: string, err: unknown) => void): Promise<void> {
    for (const close of [...this.held].reverse()) await attempt("release", close, onFailure);
    for (const pool of this.pools) await attempt("pool", () => pool.end(), onFailure);
    await attempt("metrics server", () => this.metricsServer?.close(), onFailure);
  }
}

async function attempt(what: string, step: () => unknown, onFailure: (what: string, err: unknown) => void): Promise<void> {
  try {
    await step();
  } catch (err) {
    onFailure(what, err);
  }
}
