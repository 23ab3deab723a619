import * as grpc from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import {
  addHealthService,
  buildInfoFromEnv,
  createMetrics,
  instrumentServiceImpl,
  startMetricsServer,
  type Logger,
  type MetricsServer,
  type PoolLike,
  type ServiceMetrics,
} from "@exportsvc/common";
import { addService, listen, shutdown, type ServiceImpl } from "./server";

/** The variables every gRPC service reads for its server (same names in every service's config). */
export interface GrpcServiceSettings {
  GRPC_HOST: string;
  GRPC_PORT: number;
  /** Serves /metrics on this port when set. */
  METRICS_PORT?: number;
  /** How long calls in flight may run on after a stop starts before they are cut. */
  SHUTDOWN_GRACE_MS: number;
}

/** The service's database pool: observed by the metrics, ended last. */
export type ServicePool = PoolLike & { end(): Promise<void> };

export interface ServiceImplementation {
  service: DescService;
  impl: ServiceImpl;
}

export interface BackgroundWork {
  stop(): Promise<void>;
}

export interface GrpcServiceOptions {
  /** Short name for logs: "<name> service listening". */
  name: string;
  settings: GrpcServiceSettings;
  log: Logger;
  pool: ServicePool;
  serverOptions?: grpc.ServerOptions;
  /** The services to serve; each is instrumented and reported by the health service under its full name. */
  implement(metrics: ServiceMetrics): ServiceImplementation[];
  /**
   * Starts work that runs alongside the server, once it is bound and before health reports SERVING.
   * What it returns is stopped after the server has drained.
   */
  startBackgroundWork?(): Promise<BackgroundWork | undefined>;
  /** Releases what the service holds besides the pool (clients); after a failed start and at stop, before the pool ends. */
  release?(): void | Promise<void>;
}

export interface RunningGrpcService {
  port: number;
  /** Port of /metrics when METRICS_PORT is set. */
  metricsPort?: number;
  metrics: ServiceMetrics;
  /** Graceful and idempotent: health goes NOT_SERVING, calls drain for SHUTDOWN_GRACE_MS, then everything closes. */
  stop(): Promise<void>;
}

/**
 * Runs a gRPC service the way every service here runs: its implementations instrumented, the
 * standard health service, /metrics on METRICS_PORT with the pool's connection counts, and a
 * graceful stop.
 */
export async function startGrpcService(options: GrpcServiceOptions): Promise<RunningGrpcService> {
  const { name, settings, log, pool } = options;
  const metrics = createMetrics({ build: buildInfoFromEnv() });
  metrics.observePool(pool, "main");
  const server = new grpc.Server(options.serverOptions);
  const setHealth = addHealthService(server);
  const implementations = options.implement(metrics);
  for (const { service, impl } of implementations) {
    addService(server, service, instrumentServiceImpl(metrics, service.typeName, impl));
  }
  const releaseAll = async () => {
    await options.release?.();
    await pool.end();
  };

  let port: number;
  let metricsServer: MetricsServer | undefined;
  let background: BackgroundWork | undefined;
  try {
    port = await listen(server, `${settings.GRPC_HOST}:${settings.GRPC_PORT}`);
    if (settings.METRICS_PORT !== undefined) metricsServer = await startMetricsServer(settings.METRICS_PORT, metrics.registry, settings.GRPC_HOST);
    background = await options.startBackgroundWork?.();
  } catch (err) {
    server.forceShutdown();
    await metricsServer?.close();
    await releaseAll();
    throw err;
  }
  for (const { service } of implementations) setHealth("SERVING", service.typeName);
  log.info({ port, metricsPort: metricsServer?.port }, `${name} service listening`);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Probes see NOT_SERVING before calls start being refused.
      setHealth("NOT_SERVING");
      for (const { service } of implementations) setHealth("NOT_SERVING", service.typeName);
      // Calls in flight (pages being streamed) get the grace period; the rest are cut and clients retry.
      await shutdown(server, settings.SHUTDOWN_GRACE_MS);
      await metricsServer?.close();
      await background?.stop();
      await releaseAll();
      log.info(`${name} service stopped`);
    })());
  return { port, metricsPort: metricsServer?.port, metrics, stop };
}
