import * as grpc from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import {
  createMetrics,
  ServiceLifecycle,
  type BackgroundWork,
  type GrpcServiceConfig,
  type LifecycleSettings,
  type Logger,
  type MetricsOptions,
  type ServiceListener,
  type ServiceMetrics,
  type ServicePool,
} from "@exportsvc/common";
import type { HandlerErrorPolicy } from "./handler-errors";
import { addService, listen, shutdown, type CallInstrumentation, type ServiceImplementation } from "./server";
import { addHealthService } from "./health";

/** The server's part of the configuration every gRPC service shares (@exportsvc/common's grpcServiceConfigSchema). */
export type GrpcServiceSettings = Pick<GrpcServiceConfig, "GRPC_HOST" | "GRPC_PORT"> & LifecycleSettings;

/** A generated service and its implementation, typed together by `serve`. */
export interface ServedService {
  service: DescService;
  add(server: grpc.Server, instrumentation: Required<CallInstrumentation>): void;
}

export interface ServeOptions {
  /** What the handlers' failures other than AppErrors answer (handler-errors.ts); default: a bare 500. */
  errors?: HandlerErrorPolicy;
}

/**
 * Pairs a service descriptor with its implementation, checked against the descriptor's methods.
 * The handlers are plain functions of (request, call); `errors` is applied to every method.
 */
export function serve<S extends DescService>(service: S, impl: ServiceImplementation<S>, options: ServeOptions = {}): ServedService {
  return { service, add: (server, instrumentation) => addService(server, service, impl, instrumentation, options.errors) };
}

export interface GrpcServiceOptions<M extends ServiceMetrics = ServiceMetrics> {
  /** Short name for logs: "<name> service listening". */
  name: string;
  settings: GrpcServiceSettings;
  log: Logger;
  pool: ServicePool;
  serverOptions?: grpc.ServerOptions;
  /** The services to serve; each is instrumented and reported by the health service under its full name. */
  implement(metrics: M): ServedService[];
  /**
   * Starts work that runs alongside the server, once it is bound and before health reports SERVING.
   * What it returns is stopped after the server has drained. It records into the service's metrics.
   */
  startBackgroundWork?(metrics: M): Promise<BackgroundWork | undefined>;
  /** Builds the service's metrics (its own families beside the shared ones); default: the shared ones only. */
  createMetrics?(options: MetricsOptions): M;
  /** Releases what the service holds besides the pool (clients); after a failed start and at stop, before the pool ends. */
  release?(): void | Promise<void>;
}

export interface RunningGrpcService<M extends ServiceMetrics = ServiceMetrics> {
  port: number;
  /** Port of /metrics when METRICS_PORT is set. */
  metricsPort?: number;
  metrics: M;
  /** Graceful and idempotent: health goes NOT_SERVING, calls drain for SHUTDOWN_GRACE_MS, then everything closes. */
  stop(): Promise<void>;
}

/**
 * Runs a gRPC service the way every service here runs, on the one lifecycle (ServiceLifecycle of
 * @exportsvc/common): its implementations instrumented, the standard health service, /metrics on
 * METRICS_PORT with the pool's connection counts, and a graceful stop.
 */
export async function startGrpcService<M extends ServiceMetrics = ServiceMetrics>(options: GrpcServiceOptions<M>): Promise<RunningGrpcService<M>> {
  const { name, settings, log } = options;
  const lifecycle = new ServiceLifecycle<M>({
    name: `${name} service`,
    log,
    settings,
    host: settings.GRPC_HOST,
    createMetrics: (metricsOptions) => (options.createMetrics ? options.createMetrics(metricsOptions) : (createMetrics(metricsOptions) as M)),
  });
  const { metrics } = lifecycle;
  lifecycle.holdPool(options.pool);
  if (options.release) lifecycle.hold(options.release);
  const server = new grpc.Server(options.serverOptions);
  const setHealth = addHealthService(server);
  const implementations = options.implement(metrics);
  for (const served of implementations) served.add(server, { log, metrics });

  let port = 0;
  const listener: ServiceListener = {
    listen: async () => {
      port = await listen(server, `${settings.GRPC_HOST}:${settings.GRPC_PORT}`);
      return { port };
    },
    drain: async (graceMs) => {
      // Probes see NOT_SERVING before calls start being refused.
      setHealth("NOT_SERVING");
      for (const { service } of implementations) setHealth("NOT_SERVING", service.typeName);
      // Calls in flight (pages being streamed) get the grace period; the rest are cut and clients retry.
      await shutdown(server, graceMs);
    },
    abort: () => server.forceShutdown(),
  };
  const { metricsPort, stop } = await lifecycle.start({
    listener,
    startBackgroundWork: () => options.startBackgroundWork?.(metrics) ?? Promise.resolve(undefined),
    ready: () => {
      for (const { service } of implementations) setHealth("SERVING", service.typeName);
    },
  });
  return { port, metricsPort, metrics, stop };
}
