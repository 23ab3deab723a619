import Koa from "koa";
import type { BuildIdentity, Logger } from "@exportsvc/common";
import type { GatewayMetrics } from "./metrics";
import { STREAM_STALL_TIMEOUT_MS } from "@exportsvc/datasets/src/domain";
import type { Authenticator, RateLimiter } from "./contracts";
import { problemMiddleware } from "./http/problem";
import { requestContextMiddleware } from "./http/request-context";
import { routeFallbackMiddleware } from "./http/route-fallback";
import { requireHostMiddleware } from "./http/host";
import { createGuard } from "./http/access-control";
import { openRoutes, type DatabaseProbe } from "./routes/open";
import { dataRoutes, type CatalogPort, type DataRouteDeps, type ExportPort } from "./routes/datasets";
import { buildOpenApiDocument } from "./openapi/document";
import { exposeGatewaySeries } from "./metrics-series";

export const DEFAULT_CSV_HEAD_BYTES = 64 * 1024;
export const DEFAULT_STREAM_STALL_TIMEOUT_MS = STREAM_STALL_TIMEOUT_MS;
export const DEFAULT_CATALOG_DEADLINE_MS = 10_000;

/** Everything the HTTP layer talks to, injected so tests can pass fakes. */
export interface AppDependencies {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  catalog: CatalogPort;
  exporter: ExportPort;
  probeDatabase: DatabaseProbe;
  build: BuildIdentity;
  logger: Logger;
  /** Prometheus metrics; absent in tests that do not look at them. */
  metrics?: GatewayMetrics;
  /** zlib level for gzip responses (1 = fastest). */
  gzipLevel?: number;
  /** Bytes of CSV held back before the 200 is committed (the contract says 64 KiB). */
  csvHeadBytes?: number;
  /** The catalog has this long to build a listing (CATALOG_DEADLINE_MS). */
  catalogDeadlineMs?: number;
  /** A CSV or listing response the client accepts nothing of for this long is aborted (STREAM_STALL_TIMEOUT_MS). */
  streamStallTimeoutMs?: number;
  problemTypeBaseUrl?: string;
  /** The cheap 304 decided in the gateway (routes/datasets.ts); absent: every listing goes to the catalog. */
  settledListings?: DataRouteDeps["settledListings"];
}

export function createApp(deps: AppDependencies): Koa {
  const app = new Koa();
  // Errors are answered by problemMiddleware and logged there; koa's default handler would print stacks to stderr.
  app.silent = true;

  const guard = createGuard(deps.authenticator, deps.rateLimiter);
  const routers = [
    openRoutes({ build: deps.build, probeDatabase: deps.probeDatabase, openApi: buildOpenApiDocument(deps.build.version) }),
    dataRoutes({
      catalog: deps.catalog,
      exporter: deps.exporter,
      guard,
      gzipLevel: deps.gzipLevel ?? 1,
      csvHeadBytes: deps.csvHeadBytes ?? DEFAULT_CSV_HEAD_BYTES,
      catalogDeadlineMs: deps.catalogDeadlineMs ?? DEFAULT_CATALOG_DEADLINE_MS,
      streamStallTimeoutMs: deps.streamStallTimeoutMs ?? DEFAULT_STREAM_STALL_TIMEOUT_MS,
      logger: deps.logger,
      metrics: deps.metrics,
      settledListings: deps.settledListings,
    }),
  ];

  if (deps.metrics) exposeGatewaySeries(deps.metrics, routers);
  app.use(requestContextMiddleware(deps.logger, deps.metrics));
  app.use(problemMiddleware({ logger: deps.logger, metrics: deps.metrics, typeBaseUrl: deps.problemTypeBaseUrl }));
  app.use(requireHostMiddleware());
  app.use(async (ctx, next) => {
    ctx.set("X-Content-Type-Options", "nosniff");
    await next();
  });
  app.use(routeFallbackMiddleware(routers));
  for (const router of routers) app.use(router.routes());
  return app;
}
