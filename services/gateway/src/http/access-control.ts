import type { Middleware } from "koa";
import { BoundedMap, Errors, isAppError } from "@exportsvc/common";
import type { Admission, Authenticator, Principal, RateLimiter } from "../contracts";

/**
 * Resolves the caller from the Authorization header; every data route runs behind it. Every 401
 * leaves here as the one UNAUTHORIZED problem with its RFC 6750 challenge, whatever refused the key.
 */
function authenticateMiddleware(authenticator: Authenticator): Middleware {
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

/** Organizations whose refusals a replica remembers at most (least recently refused forgotten first). */
const REFUSALS_REMEMBERED = 10_000;

/**
 * What every data route runs first: authenticate, then count the request against its organization's
 * limits. A route may start work between the two (`beforeAdmission`) when it can tell the work is
 * wanted: `recentlyRefused` says whether this replica refused the organization within the
 * Retry-After of its last 429, so a refused organization's flood starts no such work.
 */
export interface Guard {
  authenticate: Middleware;
  rateLimit: Middleware;
  recentlyRefused(organizationId: string): boolean;
}

export function createGuard(authenticator: Authenticator, rateLimiter: RateLimiter, now: () => number = Date.now): Guard {
  const refusedUntil = new BoundedMap<string, number>(REFUSALS_REMEMBERED);
  return {
    authenticate: authenticateMiddleware(authenticator),
    /**
     * Holds a concurrency slot until the response is over: finished, failed, or abandoned by the
     * client, streams included.
     */
    rateLimit: async (ctx, next) => {
      const { organizationId } = ctx.state.principal as Principal;
      let admission: Admission;
      try {
        admission = await rateLimiter.admit(organizationId);
      } catch (err) {
        if (isAppError(err) && err.status === 429) refusedUntil.set(organizationId, now() + (err.retryAfter ?? 1) * 1000);
        throw err;
      }
      const release = () => admission.release();
      if (ctx.res.closed) release();
      else ctx.res.once("close", release);
      await next();
    },
    recentlyRefused(organizationId) {
      const until = refusedUntil.get(organizationId);
      if (until === undefined) return false;
      if (until > now()) return true;
      refusedUntil.delete(organizationId);
      return false;
    },
  };
}
