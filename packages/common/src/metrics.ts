import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

// The family types services build their own families with (one prom-client, held by this package).
export { Counter, Gauge, Histogram } from "prom-client";

/**
 * The metric families every service shares: the registry, HTTP and gRPC RED, the database pools
 * and the build; each service defines its own families in its own folder (a subclass of
 * ServiceMetrics: services/gateway/src/metrics.ts, services/schema/src/metrics.ts), so this package
 * does not hold their vocabulary (services/export/src/metrics.ts too). The stream aborts and the
 * standby fallbacks stay here: two services record each of them. Label values come from closed sets or from code (route patterns, RPC names): never an
 * organization id, a dataset key, a raw path or a message, so cardinality stays bounded.
 *
 * The emitting service is told apart by the scrape target labels (`job`, `component`), not by a
 * label set here: a `service` label would collide with the one the ServiceMonitor attaches.
 */

/** Why a CSV stream ended before its last byte. */
export const STREAM_ABORT_REASONS = ["client_disconnect", "stalled", "upstream_error", "render_error", "timeout", "shutdown", "other"] as const;
export type StreamAbortReason = (typeof STREAM_ABORT_REASONS)[number];

/** Why the HTTP listener closed a connection without reading it. */
export type ConnectionRefusalReason = "max_connections";
/** Kinds of what holds the export visibility horizon back (docs/export.md); no organization label. */
export const VISIBILITY_HORIZON_HOLDERS = ["undeclared_writer", "declared_writer", "pending_changes", "reader_ignored"] as const;
export type VisibilityHorizonHolder = (typeof VISIBILITY_HORIZON_HOLDERS)[number];

const MISNAMED_DEFAULT_GAUGES = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const ERROR_CODE_PATTERN = /^[A-Z][A-Z0-9_]{0,47}$/;

/** Request latency buckets: from a cached listing (ms) to a 5000-row page of wide rows (minutes). */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The parts of a pg Pool the collector reads (structural, so common does not depend on pg). */
export interface PoolLike {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

export interface BuildInfo {
  imageTag?: string;
  commit?: string;
  version?: string;
}

export interface MetricsOptions {
  /** Default process/Node.js metrics (CPU, memory, event loop lag, GC). Default true. */
  defaultMetrics?: boolean;
  /** Exposed as build_info{image_tag,commit,version} 1. */
  build?: BuildInfo;
}

export interface HttpObservation {
  /** The matched route pattern (e.g. `/v1/datasets/:key/csv`), or "unmatched"; never the raw path. */
  route: string;
  method: string;
  status: number;
  durationSeconds: number;
}

export interface GrpcObservation {
  /** Fully-qualified service name, e.g. `exportsvc.v1.ExportService`. */
  service: string;
  method: string;
  /** gRPC status code name, e.g. "OK", "UNAVAILABLE". */
  code: string;
  durationSeconds: number;
}

export class ServiceMetrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<"route" | "method" | "status">;
  readonly httpDuration: Histogram<"route" | "method" | "status">;
  readonly grpcHandled: Counter<"grpc_service" | "grpc_method" | "grpc_code">;
  readonly grpcHandling: Histogram<"grpc_service" | "grpc_method">;
  readonly exportStreamAborts: Counter<"reason">;
  readonly replicaFallbacks: Counter<"reads">;
  readonly httpConnectionsRefused: Counter<"reason">;
  readonly httpOpenConnections: Gauge;
  readonly problemResponses: Counter<"status" | "error_code">;
  readonly dbPoolConnections: Gauge<"pool" | "state">;
  readonly buildInfo: Gauge<"image_tag" | "commit" | "version">;
  private readonly pools = new Map<string, PoolLike>();
  private openConnections?: () => Promise<number>;

  constructor(options: MetricsOptions = {}) {
    this.registry = new Registry();
    if (options.defaultMetrics !== false) {
      collectDefaultMetrics({ register: this.registry });
      // Gauges named like counters break the naming convention (promtool check metrics); their
      // per-type siblings (nodejs_active_handles{type} etc.) carry the same information.
      for (const name of MISNAMED_DEFAULT_GAUGES) this.registry.removeSingleMetric(name);
    }

    this.httpRequests = this.counter("http_requests_total", "HTTP requests answered, by matched route pattern, method and status code.", ["route", "method", "status"]);
    this.httpDuration = this.histogram("http_request_duration_seconds", "Time from request to the last byte of the response (a CSV page: the whole stream).", ["route", "method", "status"], LATENCY_BUCKETS);
    this.grpcHandled = this.counter("grpc_server_handled_total", "gRPC calls completed by the server, by service, method and status code name.", ["grpc_service", "grpc_method", "grpc_code"]);
    this.grpcHandling = this.histogram("grpc_server_handling_seconds", "Time the server spent on a gRPC call until its status was sent (a stream: until its end).", ["grpc_service", "grpc_method"], LATENCY_BUCKETS);
    this.exportStreamAborts = this.counter("export_stream_aborts_total", "CSV streams aborted after the 200 was sent, by reason.", ["reason"]);
    this.replicaFallbacks = this.counter("export_replica_fallbacks_total", "Reads meant for the DATABASE_READ_URL standby that went to the primary because the standby lagged past READ_REPLICA_MAX_WAIT_MS, by what was read.", ["reads"]);
    this.httpConnectionsRefused = this.counter("http_connections_refused_total", "Connections the HTTP listener closed at once, unread, by reason (max_connections: HTTP_MAX_CONNECTIONS were open).", ["reason"]);
    const metrics = this;
    this.httpOpenConnections = this.gauge("http_open_connections", "Connections the HTTP listener holds open (compare with HTTP_MAX_CONNECTIONS).", [], async function () {
      if (metrics.openConnections) this.set(await metrics.openConnections());
    });
    this.problemResponses = this.counter("http_problem_responses_total", "problem+json error responses, by status and errorCode.", ["status", "error_code"]);
    const pools = this.pools;
    this.dbPoolConnections = this.gauge("db_pool_connections", "PostgreSQL client pool connections, by pool and state (total, idle, waiting clients).", ["pool", "state"], function () {
      for (const [name, pool] of pools) {
        this.set({ pool: name, state: "total" }, pool.totalCount);
        this.set({ pool: name, state: "idle" }, pool.idleCount);
        this.set({ pool: name, state: "waiting" }, pool.waitingCount);
      }
    });
    this.buildInfo = this.gauge("build_info", "The deployed build; always 1.", ["image_tag", "commit", "version"]);
    this.buildInfo.set(
      {
        image_tag: options.build?.imageTag ?? "unknown",
        commit: options.build?.commit ?? "unknown",
        version: options.build?.version ?? "unknown",
      },
      1,
    );
  }

  /** Declares a counter in this registry: each service declares its own families with these, one line each. */
  protected counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  protected histogram<L extends string = string>(name: string, help: string, labelNames: readonly L[], buckets: number[]): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  /** `collect` runs at every scrape (a gauge that reads its value then). */
  protected gauge<L extends string = string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (this: Gauge<L>) => void | Promise<void>): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry], ...(collect ? { collect } : {}) });
  }

  observeHttpRequest(o: HttpObservation): void {
    const labels = { route: o.route || "unmatched", method: normalizeMethod(o.method), status: String(o.status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, o.durationSeconds);
  }

  /** Counts a problem+json response; codes outside the catalogue's shape collapse into OTHER. */
  recordProblem(status: number, errorCode: string): void {
    this.problemResponses.inc({ status: String(status), error_code: ERROR_CODE_PATTERN.test(errorCode) ? errorCode : "OTHER" });
  }

  observeGrpcCall(o: GrpcObservation): void {
    this.grpcHandled.inc({ grpc_service: o.service, grpc_method: o.method, grpc_code: o.code });
    this.grpcHandling.observe({ grpc_service: o.service, grpc_method: o.method }, o.durationSeconds);
  }

  /**
   * A read meant for the hot standby went to the primary (the standby lagged past the bound):
   * `page` an export page, `listing` a dataset listing. Call exposeReplicaFallbacks() at start-up
   * where a standby is configured, so the first fallback is an increase from 0.
   */
  recordReplicaFallback(reads: "page" | "listing"): void {
    this.replicaFallbacks.inc({ reads });
  }

  exposeReplicaFallbacks(reads: "page" | "listing"): void {
    this.replicaFallbacks.inc({ reads }, 0);
  }

  recordStreamAbort(reason: StreamAbortReason): void {
    this.exportStreamAborts.inc({ reason: STREAM_ABORT_REASONS.includes(reason) ? reason : "other" });
  }

  recordRefusedConnection(reason: ConnectionRefusalReason): void {
    this.httpConnectionsRefused.inc({ reason });
  }

  /** Reports the listener's open connections at every scrape. */
  observeOpenConnections(count: () => Promise<number>): void {
    this.openConnections = count;
  }

  /** Reports the pool's connection counts at every scrape. */
  observePool(pool: PoolLike, name = "main"): void {
    this.pools.set(name, pool);
  }

  /** Names of every metric family in the registry (the catalogue dashboards and alerts may use). */
  metricNames(): string[] {
    return this.registry.getMetricsAsArray().map((m) => m.name);
  }
}

/**
 * Exposes each label set of a labelled counter at 0. A counter series born at its first increment
 * shows no increase() and no rate() until its second, so an alert on it stays empty (not 0) and the
 * first event never fires it: the service that records a counter starts every label set it knows.
 */
export function countFromZero<L extends string>(counter: Counter<L>, labelSets: ReadonlyArray<Partial<Record<L, string>>>): void {
  for (const labels of labelSets) counter.inc(labels, 0);
}

export function createMetrics(options: MetricsOptions = {}): ServiceMetrics {
  return new ServiceMetrics(options);
}

function normalizeMethod(method: string): string {
  const upper = method.toUpperCase();
  return HTTP_METHODS.has(upper) ? upper : "OTHER";
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves the registry at GET /metrics on its own port, apart from the public API and gRPC ports,
 * so metrics never travel through the ingress and scrapes never compete with API admission.
 */
export function startMetricsServer(port: number, registry: Registry, host = "0.0.0.0"): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(path === "/metrics" ? 405 : 404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
      return;
    }
    registry.metrics().then(
      (body) => {
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      (err: unknown) => {
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end(`metrics collection failed: ${String(err)}\n`);
      },
    );
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}
