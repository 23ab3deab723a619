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
 * Early works one organization may have in flight on a replica. A client polling its listing has one
 * request in flight; a burst of concurrent requests waits for admission like any other, so it cannot
 * queue statements on the pool every organization shares.
 */
export const EARLY_WORK_PER_ORGANIZATION = 2;

/**
 * What every data route runs first: authenticate, then count the request against its organization's
 * limits (`rateLimit`). A route may start work between the two, to overlap it with admission's round
 * trip, only through `beforeAdmission`.
 */
export interface Guard {
  authenticate: Middleware;
  rateLimit: Middleware;
  /**
   * Starts `work` now, before the request is admitted, unless this replica refused the organization
   * (429) within that refusal's Retry-After or already runs EARLY_WORK_PER_ORGANIZATION early works
   * for it: then undefined, and the route does the work after admission. So a refused organization's
   * flood starts one early work per Retry-After (the request that brings the 429), and a burst at most
   * EARLY_WORK_PER_ORGANIZATION at once.
   */
  beforeAdmission<T>(organizationId: string, work: () => Promise<T>): Promise<T> | undefined;
}

export function createGuard(authenticator: Authenticator, rateLimiter: RateLimiter, now: () => number = Date.now): Guard {
  const refusedUntil = new BoundedMap<string, number>(REFUSALS_REMEMBERED);
  const earlyInFlight = new Map<string, number>();
  const recentlyRefused = (organizationId: string) => {
    const until = refusedUntil.get(organizationId);
    if (until === undefined) return false;
    if (until > now()) return true;
    refusedUntil.delete(organizationId);
    return false;
  };
  const settleEarly = (organizationId: string) => {
    const left = (earlyInFlight.get(organizationId) ?? 1) - 1;
    if (left > 0) earlyInFlight.set(organizationId, left);
    else earlyInFlight.delete(organizationId);
  };
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
    beforeAdmission<T>(organizationId: string, work: () => Promise<T>) {
      const inFlight = earlyInFlight.get(organizationId) ?? 0;
      if (inFlight >= EARLY_WORK_PER_ORGANIZATION || recentlyRefused(organizationId)) return undefined;
      earlyInFlight.set(organizationId, inFlight + 1);
      const settled = () => settleEarly(organizationId);
      let started: Promise<T>;
      try {
        started = work();
      } catch (err) {
        settled();
        throw err;
      }
      started.then(settled, settled);
      return started;
    },
  };
}
