import type { Middleware } from "koa";
import type { Authenticator, Principal, RateLimiter } from "../contracts";

/** Resolves the caller from the Authorization header; every data route runs behind it. */
export function authenticateMiddleware(authenticator: Authenticator): Middleware {
  return async (ctx, next) => {
    ctx.state.principal = await authenticator.authenticate(ctx.get("authorization") || undefined);
    await next();
  };
}

/**
 * Counts the request against its organization's limits and holds a concurrency slot until the
 * response is over: finished, failed, or abandoned by the client, streams included.
 */
export function rateLimitMiddleware(rateLimiter: RateLimiter): Middleware {
  return async (ctx, next) => {
    const principal = ctx.state.principal as Principal;
    const admission = await rateLimiter.admit(principal.organizationId);
    const release = () => admission.release();
    if (ctx.res.closed) release();
    else ctx.res.once("close", release);
    await next();
  };
}
