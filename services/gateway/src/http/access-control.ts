import type { Middleware } from "koa";
import { Errors, isAppError } from "@exportsvc/common";
import type { Authenticator, Principal, RateLimiter } from "../contracts";

/**
 * Resolves the caller from the Authorization header; every data route runs behind it. Every 401
 * leaves here as the one UNAUTHORIZED problem with its RFC 6750 challenge, whatever refused the key.
 */
export function authenticateMiddleware(authenticator: Authenticator): Middleware {
  return async (ctx, next) => {
    const credential = ctx.get("authorization") || undefined;
    try {
      ctx.state.principal = await authenticator.authenticate(credential);
    } catch (err) {
      if (isAppError(err) && err.status === 401) throw Errors.unauthorized(credential !== undefined);
      throw err;
    }
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
