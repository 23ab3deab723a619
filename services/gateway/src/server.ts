import { createHttpServer } from "./http/server";
import { httpListener } from "./http/listener";
import { CatalogService, ExportService } from "@exportsvc/proto";
import { createClient, traceMetadata } from "@exportsvc/rpc";
import { createPool } from "@exportsvc/db";
import { ListingCache, organizationListingState, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";
import { createLogger, isAppError, ServiceLifecycle } from "@exportsvc/common";
import type { RateLimiter } from "./contracts";
import { createApp } from "./app";
import { httpLimitsFromConfig, type GatewayConfig } from "./config";
import { authenticatorTimingsFromConfig, createAuthenticator } from "./auth";
import { createRateLimiter, rateLimiterOptionsFromConfig } from "./limits";
import { createSharedStore, sharedStoreOptionsFromConfig } from "./store";
import { databaseProbe } from "./readiness";
import { GatewayMetrics } from "./metrics";

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

/**
 * Wires the gateway from its configuration and starts listening, on the one service lifecycle
 * (ServiceLifecycle: build read once, /metrics, the ordered stop); its HTTP specifics (the idle
 * connections closed while draining, every connection cut when the grace period is over) are the
 * listener's drain (http/listener.ts).
 */
export async function start(config: GatewayConfig): Promise<RunningGateway> {
  const logger = createLogger("gateway", config.LOG_LEVEL);
  const lifecycle = new ServiceLifecycle({ name: "gateway", log: logger, settings: config, host: config.HOST, createMetrics: (options) => new GatewayMetrics(options) });
  const { build, metrics } = lifecycle;
  // A key store that stops answering must become 503 AUTH_UNAVAILABLE, not a request that hangs
  // holding a concurrency slot: every statement of this pool (key look-ups, readiness) is bounded.
  const pool = lifecycle.holdPool(
    createPool({
      connectionString: config.DATABASE_URL,
      max: config.DATABASE_POOL_MAX,
      maxUses: config.DATABASE_POOL_MAX_USES,
      applicationName: SERVICE_APPLICATION_NAME.gateway,
      statementTimeoutMs: config.KEY_STORE_TIMEOUT_MS,
    }),
  );
  // Released the last held first: the clients, the authenticator and the limiter before the store they use.
  const store = createSharedStore({
    ...sharedStoreOptionsFromConfig(config),
    onError: (err) => logger.warn({ err: err.message }, "shared store error"),
  });
  lifecycle.hold(() => store.close());
  const rateLimiter = createRateLimiter(store, { ...rateLimiterOptionsFromConfig(config), logger });
  lifecycle.hold(() => rateLimiter.close());
  rateLimiter.onFallback((event) => metrics.setSharedStoreFallback(event.active));
  const countedRateLimiter = countRejections(rateLimiter, metrics, config.RATE_LIMIT_CONCURRENCY);
  const authenticator = createAuthenticator({
    db: pool,
    store,
    keyHashSecret: config.KEY_HASH_SECRET,
    ...authenticatorTimingsFromConfig(config),
    logger,
    metrics,
  });
  lifecycle.hold(() => authenticator.close());
  const catalogClient = createClient(CatalogService, config.CATALOG_ADDRESS);
  const exportClient = createClient(ExportService, config.EXPORT_ADDRESS);
  lifecycle.hold(() => catalogClient.close());
  lifecycle.hold(() => exportClient.close());

  const app = createApp({
    authenticator,
    rateLimiter: countedRateLimiter,
    catalog: {
      // No gRPC deadline: CATALOG_DEADLINE_MS bounds the head (the build), the stall timeout the body.
      listDatasets: (request, traceId) => catalogClient.listDatasets(request, { metadata: traceMetadata(traceId) }),
    },
    exporter: {
      exportCsv: (request, traceId) => exportClient.exportCsv(request, { metadata: traceMetadata(traceId) }),
      exportDeletions: (request, traceId) => exportClient.exportDeletions(request, { metadata: traceMetadata(traceId) }),
      exportRewrites: (request, traceId) => exportClient.exportRewrites(request, { metadata: traceMetadata(traceId) }),
    },
    probeDatabase: databaseProbe(pool, config.READINESS_TIMEOUT_MS),
    // Verdicts only (maxBytes 0): a few dozen bytes per organization.
    settledListings: { cache: new ListingCache(0), state: (organizationId) => organizationListingState(pool, organizationId) },
    build,
    logger,
    metrics,
    gzipLevel: config.GZIP_LEVEL,
    catalogDeadlineMs: config.CATALOG_DEADLINE_MS,
    streamStallTimeoutMs: config.STREAM_STALL_TIMEOUT_MS,
    problemTypeBaseUrl: config.PROBLEM_TYPE_BASE_URL,
  });

  const server = createHttpServer(app.callback(), { ...httpLimitsFromConfig(config), logger, metrics, problemTypeBaseUrl: config.PROBLEM_TYPE_BASE_URL });
  const listener = httpListener(server, { port: config.PORT, host: config.HOST }, logger);
  const { stop } = await lifecycle.start({ listener });
  return { url: listener.url(), stop };
}

/** Counts 429s by the limit that was reached (told apart by RateLimit-Limit, as clients do). */
export function countRejections(limiter: RateLimiter, metrics: Pick<GatewayMetrics, "recordRateLimitRejection">, concurrencyLimit: number): RateLimiter {
  return {
    async admit(organizationId) {
      try {
        return await limiter.admit(organizationId);
      } catch (err) {
        if (isAppError(err) && err.status === 429) {
          const concurrency = err.headers?.["RateLimit-Limit"] === String(concurrencyLimit);
          metrics.recordRateLimitRejection(concurrency ? "concurrency" : "window");
        }
        throw err;
      }
    },
  };
}
