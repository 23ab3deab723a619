import type { Middleware } from "koa";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { requestTraceId } from "./trace";

/**
 * Gives every request its trace id and one access-log line when the response is done (or the
 * client went away), including streamed exports that finish long after the handler returned.
 */
export function requestContextMiddleware(logger: Logger, metrics?: ServiceMetrics): Middleware {
  return async (ctx, next) => {
    const startedAt = process.hrtime.bigint();
    ctx.state.traceId = requestTraceId(ctx.get("traceparent") || undefined);
    ctx.res.once("close", () => {
      const durationMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
      // The route pattern, never the raw path: label values must come from a closed set.
      const route = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      metrics?.observeHttpRequest({
        route: typeof route === "string" ? route : "unmatched",
        method: ctx.method,
        status: ctx.res.statusCode,
        durationSeconds: durationMs / 1000,
      });
      const principal = ctx.state.principal as { organizationId?: string; keyId?: string } | undefined;
      // Probes and scrapers poll the open endpoints constantly; their lines would drown the data requests.
      const level = ctx.path.startsWith("/v1/") ? "info" : "debug";
      logger[level](
        {
          traceId: ctx.state.traceId,
          method: ctx.method,
          path: ctx.path,
          status: ctx.res.statusCode,
          completed: ctx.res.writableFinished,
          durationMs: Math.round(durationMs * 10) / 10,
          organizationId: principal?.organizationId,
          keyId: principal?.keyId,
        },
        "request",
      );
    });
    await next();
  };
}
