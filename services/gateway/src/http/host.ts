import type { Middleware } from "koa";
import { Errors } from "@exportsvc/common";

/**
 * RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400. Node's own check answers with a bare
 * status line, so it is switched off in the listener and done here, as a problem+json.
 */
export function requireHostMiddleware(): Middleware {
  return async (ctx, next) => {
    if (ctx.req.httpVersionMajor === 1 && ctx.req.httpVersionMinor >= 1 && ctx.req.headers.host === undefined) {
      throw Errors.badRequest("An HTTP/1.1 request must carry a Host header.");
    }
    await next();
  };
}
