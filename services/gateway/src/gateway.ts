import { createServer, type Server } from "node:http";
import { answerMalformedRequests } from "./http/client-error";
import type { AddressInfo } from "node:net";
import { CatalogService, ExportService } from "@exportsvc/proto";
import { createClient } from "@exportsvc/rpc";
import { createPool } from "@exportsvc/db";
import { createLogger, createMetrics, isAppError, startMetricsServer, type MetricsServer, type ServiceMetrics } from "@exportsvc/common";
import type { RateLimiter } from "./contracts";
import { createApp } from "./app";
import type { GatewayConfig } from "./config";
import { authenticatorTimingsFromConfig, createAuthenticator } from "./auth";
import { createRateLimiter, rateLimiterOptionsFromConfig } from "./limits";
import { createSharedStore, sharedStoreOptionsFromConfig } from "./store";
import { databaseProbe } from "./readiness";

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

/** Node's default keep-alive (5 s) is shorter than most load balancers' idle timeout, which causes spurious 502s. */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Wires the gateway from its configuration and starts listening. */
export async function startGateway(config: GatewayConfig): Promise<RunningGateway> {
  const logger = createLogger("gateway", config.logLevel);
  const metrics = createMetrics({ build: config.build });
  // A key store that stops answering must become 503 AUTH_UNAVAILABLE, not a request that hangs
  // holding a concurrency slot: every statement of this pool (key look-ups, readiness) is bounded.
  const pool = createPool({
    connectionString: config.databaseUrl,
    max: config.databasePoolMax,
    applicationName: "exportsvc-gateway",
    statementTimeoutMs: config.keyStoreTimeoutMs,
  });
  metrics.observePool(pool);
  const store = createSharedStore({
    ...sharedStoreOptionsFromConfig(config.store),
    onError: (err) => logger.warn({ err: err.message }, "shared store error"),
  });
  const rateLimiter = createRateLimiter(store, { ...rateLimiterOptionsFromConfig(config.limits), logger });
  rateLimiter.onFallback((event) => metrics.setSharedStoreFallback(event.active));
  const countedRateLimiter = countRejections(rateLimiter, metrics, config.limits.RATE_LIMIT_CONCURRENCY);
  const authenticator = createAuthenticator({
    db: pool,
    store,
    keyHashSecret: config.keyHashSecret,
    ...authenticatorTimingsFromConfig(config.auth),
    logger,
  });
  const catalogClient = createClient(CatalogService, config.catalogAddress);
  const exportClient = createClient(ExportService, config.exportAddress);

  const app = createApp({
    authenticator,
    rateLimiter: countedRateLimiter,
    catalog: { listDatasets: (request) => catalogClient.listDatasets(request, { deadlineMs: config.catalogDeadlineMs }) },
    exporter: { exportCsv: (request) => exportClient.exportCsv(request) },
    probeDatabase: databaseProbe(pool, config.readinessTimeoutMs),
    build: config.build,
    logger,
    metrics,
    gzipLevel: config.gzipLevel,
    problemTypeBaseUrl: config.problemTypeBaseUrl,
  });

  const server: Server = createServer(app.callback());
  answerMalformedRequests(server, config.problemTypeBaseUrl);
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  let metricsServer: MetricsServer | undefined;
  if (config.metricsPort !== undefined) metricsServer = await startMetricsServer(config.metricsPort, metrics.registry, config.host);

  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${address.port}`;
  logger.info({ url, metricsPort: metricsServer?.port, build: config.build }, "gateway listening");

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // New connections are refused at once; streams in flight get the grace period to finish their page.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const grace = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), config.shutdownGraceMs).unref());
      if ((await Promise.race([closed, grace])) === "timeout") {
        logger.warn("shutdown grace period over: aborting the requests still in flight");
        server.closeAllConnections();
        await closed;
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
export function countRejections(limiter: RateLimiter, metrics: ServiceMetrics, concurrencyLimit: number): RateLimiter {
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
