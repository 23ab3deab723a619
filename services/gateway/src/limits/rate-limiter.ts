import { randomUUID } from "node:crypto";
import { Errors, type Logger } from "@exportsvc/common";
import type { Admission, FallbackEvent, ManagedRateLimiter, RateLimiterStatus } from "../contracts";
import { withLocalFallback, type Clock, type SharedStore } from "../store";

export interface RateLimiterOptions {
  /** Requests in flight per organization (5, docs/contract.md §11). */
  concurrency: number;
  /** Requests admitted per sliding window per organization (600, docs/contract.md §11). */
  perWindow: number;
  windowSeconds: number;
  /** Lifetime of a concurrency slot unless renewed; bounds how long a crashed replica's slots stay taken. */
  leaseSeconds: number;
  /** How often a held slot is renewed; default a third of the lease, so two renewals may fail in a row. */
  renewEverySeconds?: number;
  /** Retry-After of a concurrency 429: only a polling interval, since a slot frees when a request ends. */
  concurrencyRetryAfterSeconds?: number;
  /** Prefix of the store keys; lets several deployments (or tests) share one Redis. */
  keyPrefix?: string;
  /** Clock of the per-replica fallback store. */
  clock?: Clock;
  logger?: Logger;
}

/**
 * Per-organization limits across all keys and all replicas: a concurrency cap whose slots are
 * leases (a SIGKILLed replica's slots expire instead of leaking), and a sliding-window request
 * budget. Admission is one atomic store operation, and a rejected request writes nothing, so a 429
 * consumes no budget. While the shared store is down each replica applies the limits on its own.
 */
export function createRateLimiter(store: SharedStore, options: RateLimiterOptions): ManagedRateLimiter {
  const leaseMs = Math.round(options.leaseSeconds * 1000);
  const windowMs = Math.round(options.windowSeconds * 1000);
  const renewEveryMs = Math.max(1, Math.round((options.renewEverySeconds ?? options.leaseSeconds / 3) * 1000));
  const concurrencyRetryAfter = options.concurrencyRetryAfterSeconds ?? 1;
  const prefix = options.keyPrefix ?? "exportsvc:";
  const router = withLocalFallback(store, { clock: options.clock });
  const log = options.logger;

  router.onFallback((event) => {
    if (event.active) log?.warn({ reason: event.reason }, "shared store unavailable: rate limits are per replica until it answers");
    else log?.info("shared store answering again: rate limits are shared across replicas");
  });

  // The hash tag {organizationId} keeps both keys of an organization in one Redis Cluster slot.
  const keysOf = (organizationId: string) => ({
    leasesKey: `${prefix}rl:{${organizationId}}:leases`,
    windowKey: `${prefix}rl:{${organizationId}}:window`,
  });

  const rejection = (limit: "window" | "concurrency", retryAfterMs: number) => {
    if (limit === "concurrency") {
      return Errors.rateLimited({
        limit: options.concurrency,
        retryAfter: concurrencyRetryAfter,
        reset: concurrencyRetryAfter,
        detail: `The organization already has ${options.concurrency} requests in flight. A slot frees when one of them finishes; keep fewer requests in flight (one per dataset, datasets one after another).`,
      });
    }
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    return Errors.rateLimited({
      limit: options.perWindow,
      retryAfter: seconds,
      reset: seconds,
      detail: `The organization used its ${options.perWindow} requests per ${options.windowSeconds} seconds. Retry after ${seconds} seconds; slow the sync or use a larger limit.`,
    });
  };

  return {
    async admit(organizationId: string): Promise<Admission> {
      const { leasesKey, windowKey } = keysOf(organizationId);
      const id = randomUUID();
      const { value: result, store: holder } = await router.run((s) =>
        s.admit({ leasesKey, windowKey, id, maxLeases: options.concurrency, leaseMs, maxInWindow: options.perWindow, windowMs }),
      );
      if (!result.admitted) throw rejection(result.limit, result.retryAfterMs);

      let released = false;
      const renewal = setInterval(() => {
        holder.renewLease(leasesKey, id, leaseMs).then(
          (held) => {
            if (held || released) return;
            // Renewals failed for a whole lease (store unreachable): the slot was given up.
            clearInterval(renewal);
            log?.warn({ organizationId }, "concurrency lease expired while its request was still running");
          },
          // Unreachable for now: the next tick tries again; the lease outlives two misses.
          () => undefined,
        );
      }, renewEveryMs);
      renewal.unref();

      return {
        release() {
          if (released) return;
          released = true;
          clearInterval(renewal);
          holder.releaseLease(leasesKey, id).catch((err: unknown) => {
            // The lease expires by itself within leaseSeconds.
            log?.warn({ organizationId, err: (err as Error).message }, "could not release a concurrency lease");
          });
        },
      };
    },
    status(): RateLimiterStatus {
      return { mode: store.backend === "redis" && !router.fallbackActive() ? "shared" : "local", store: store.status() };
    },
    onFallback: (listener: (event: FallbackEvent) => void) => router.onFallback(listener),
    close: () => router.close(),
  };
}
