import type { Server } from "node:http";
import { createHttpServer, silentConnectionCloser } from "./http/server";
import type { AddressInfo } from "node:net";
import { CatalogService, ExportService } from "@exportsvc/proto";
import { createClient, traceMetadata } from "@exportsvc/rpc";
import { createPool } from "@exportsvc/db";
import { ListingCache, organizationListingState, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";
import { createLogger, isAppError, startMetricsServer, type MetricsServer } from "@exportsvc/common";
import type { RateLimiter } from "./contracts";
import { createApp } from "./app";
import { buildInfoFromConfig, httpLimitsFromConfig, type GatewayConfig } from "./config";
import { authenticatorTimingsFromConfig, createAuthenticator } from "./auth";
import { createRateLimiter, rateLimiterOptionsFromConfig } from "./limits";
import { createSharedStore, sharedStoreOptionsFromConfig } from "./store";
import { databaseProbe } from "./readiness";
import { GatewayMetrics } from "./metrics";

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

/** Wires the gateway from its configuration and starts listening. */
export async function start(config: GatewayConfig): Promise<RunningGateway> {
  const logger = createLogger("gateway", config.LOG_LEVEL);
  const build = buildInfoFromConfig(config);
  const metrics = new GatewayMetrics({ build });
  // A key store that stops answering must become 503 AUTH_UNAVAILABLE, not a request that hangs
  // holding a concurrency slot: every statement of this pool (key look-ups, readiness) is bounded.
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    max: config.DATABASE_POOL_MAX,
    maxUses: config.DATABASE_POOL_MAX_USES,
    applicationName: SERVICE_APPLICATION_NAME.gateway,
    statementTimeoutMs: config.KEY_STORE_TIMEOUT_MS,
  });
  metrics.observePool(pool);
  const store = createSharedStore({
    ...sharedStoreOptionsFromConfig(config),
    onError: (err) => logger.warn({ err: err.message }, "shared store error"),
  });
  const rateLimiter = createRateLimiter(store, { ...rateLimiterOptionsFromConfig(config), logger });
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
  const catalogClient = createClient(CatalogService, config.CATALOG_ADDRESS);
  const exportClient = createClient(ExportService, config.EXPORT_ADDRESS);

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

  const server: Server = createHttpServer(app.callback(), { ...httpLimitsFromConfig(config), logger, metrics, problemTypeBaseUrl: config.PROBLEM_TYPE_BASE_URL });
  const closeSilentConnections = silentConnectionCloser(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.PORT, config.HOST, () => {
      server.off("error", reject);
      resolve();
    });
  });
  let metricsServer: MetricsServer | undefined;
  if (config.METRICS_PORT !== undefined) metricsServer = await startMetricsServer(config.METRICS_PORT, metrics.registry, config.HOST);

  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${address.port}`;
  logger.info({ url, metricsPort: metricsServer?.port, build }, "gateway listening");

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // New connections are refused at once; streams in flight get the grace period to finish their page.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const closeIdle = () => {
        server.closeIdleConnections();
        closeSilentConnections();
      };
      closeIdle();
      const grace = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), config.SHUTDOWN_GRACE_MS).unref());
      // A keep-alive connection whose stream just finished turns idle and would hold the close
      // until the grace period ends: close such connections as they turn idle.
      const idleSweep = setInterval(closeIdle, 200);
      try {
        if ((await Promise.race([closed, grace])) === "timeout") {
          logger.warn("shutdown grace period over: aborting the requests still in flight");
          server.closeAllConnections();
          await closed;
        }
      } finally {
        clearInterval(idleSweep);
      }
      catalogClient.close();
      exportClient.close();
      await authenticator.close().catch(() => undefined);
      await rateLimiter.close().catch(() => undefined);
      await store.close().catch(() => undefined);
      await pool.end().catch(() => undefined);
      await metricsServer?.close();
      logger.info("gateway stopped");
    })());

  return { url, stop };
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
