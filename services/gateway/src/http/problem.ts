import type { Context, Middleware } from "koa";
import { Errors, isAppError, type AppError, type Logger, type ServiceMetrics } from "@exportsvc/common";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

export interface ProblemOptions {
  /** When set, `type` is `<base>#<ERROR_CODE>` (the anchors of docs/errors.md); otherwise `about:blank`. */
  typeBaseUrl?: string;
  logger: Logger;
  metrics?: ServiceMetrics;
}

/**
 * The body of an application/problem+json response (RFC 9457 plus errorCode, traceId, errors).
 * `instance` is the request path; absent only when it is not known (a request the HTTP parser
 * refused before reading its request line).
 */
export function problemBody(error: AppError, instance: string | undefined, traceId: string, typeBaseUrl?: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    type: typeBaseUrl ? `${typeBaseUrl}#${error.errorCode}` : "about:blank",
    title: error.title,
    status: error.status,
  };
  // The contract: a 401 never explains itself.
  if (error.detail !== undefined && error.status !== 401) body.detail = error.detail;
  if (instance !== undefined) body.instance = instance;
  body.errorCode = error.errorCode;
  if (!error.omitTraceId) body.traceId = traceId;
  if (error.errors) body.errors = error.errors;
  for (const [name, value] of Object.entries(error.extensions ?? {})) {
    if (!(name in body)) body[name] = value;
  }
  return body;
}

/** Writes an AppError as the response (status, headers, problem body). */
export function sendProblem(ctx: Context, error: AppError, typeBaseUrl?: string): void {
  ctx.status = error.status;
  for (const [name, value] of Object.entries(error.headers ?? {})) ctx.set(name, value);
  if (error.retryAfter !== undefined) ctx.set("Retry-After", String(Math.max(0, Math.ceil(error.retryAfter))));
  ctx.type = PROBLEM_CONTENT_TYPE;
  ctx.body = JSON.stringify(problemBody(error, ctx.path, ctx.state.traceId as string, typeBaseUrl));
}

/**
 * The one place where failures become responses: an AppError keeps its status and fields; anything
 * else is logged and answered with a 500 INTERNAL_ERROR that reveals nothing of it.
 */
export function problemMiddleware(options: ProblemOptions): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const error = isAppError(err) ? err : Errors.internal();
      if (!isAppError(err)) {
        options.logger.error({ err, traceId: ctx.state.traceId, path: ctx.path }, "unhandled error");
      } else if (err.status >= 500) {
        // Every 5xx is in this service's log with its trace id (the service behind logged its cause).
        options.logger.warn({ traceId: ctx.state.traceId, path: ctx.path, status: err.status, errorCode: err.errorCode }, "server error answered");
      }
      if (ctx.headerSent || !ctx.writable) {
        // Too late for a problem body: the status line has gone out. Abort so the client cannot mistake a cut body for a whole one.
        ctx.req.socket.destroy();
        return;
      }
      // Headers set by the failed handler (ETag, Cache-Control, ...) do not describe a problem.
      for (const name of Object.keys(ctx.response.headers)) {
        if (name !== "vary" && name !== "x-content-type-options") ctx.remove(name);
      }
      options.metrics?.recordProblem(error.status, error.errorCode);
      sendProblem(ctx, error, options.typeBaseUrl);
    }
  };
}
