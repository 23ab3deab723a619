import { createServer, type RequestListener, type Server } from "node:http";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { answerMalformedRequests } from "./client-error";
import type { HttpServerLimits } from "./limits";

export { DEFAULT_HTTP_LIMITS, type HttpServerLimits } from "./limits";

export interface HttpServerOptions extends HttpServerLimits {
  logger: Logger;
  metrics?: ServiceMetrics;
  problemTypeBaseUrl?: string;
}

/** One warning per this interval at most while connections are being refused (an attack must not flood the log). */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * The gateway's HTTP listener: capped connections (refusals counted and logged), header and
 * keep-alive timeouts enforced to within a second, and parser-level failures answered as problems.
 */
export function createHttpServer(listener: RequestListener, options: HttpServerOptions): Server {
  const server = createServer(
    {
      // Host is checked by the app, so that its absence is a problem+json like every other error.
      requireHostHeader: false,
      headersTimeout: options.headersTimeoutMs,
      // Node checks the header timeout on this interval (default 30 s, which more than triples a 10 s timeout).
      connectionsCheckingInterval: Math.min(1_000, options.headersTimeoutMs),
    },
    listener,
  );
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.maxConnections = options.maxConnections;
  answerMalformedRequests(server, { typeBaseUrl: options.problemTypeBaseUrl, logger: options.logger, metrics: options.metrics });

  let refusedSinceLog = 0;
  let lastLogAt = -Infinity;
  server.on("drop", () => {
    options.metrics?.recordRefusedConnection("max_connections");
    refusedSinceLog++;
    const now = Date.now();
    if (now - lastLogAt < REFUSAL_LOG_INTERVAL_MS) return;
    options.logger.warn(
      { maxConnections: options.maxConnections, refused: refusedSinceLog },
      "connection cap reached: new connections are refused (see docs/security.md)",
    );
    refusedSinceLog = 0;
    lastLogAt = now;
  });
  options.metrics?.observeOpenConnections(
    () => new Promise<number>((resolve) => server.getConnections((err, count) => resolve(err ? 0 : count))),
  );
  return server;
}
