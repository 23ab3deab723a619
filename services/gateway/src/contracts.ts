/**
 * Seams between the gateway's HTTP layer (app, routes) and its shared-state parts (auth, limits,
 * store). Implementations live in src/auth, src/limits and src/store.
 */

/** Who is calling: derived from the API key, never from the request. */
export interface Principal {
  organizationId: string;
  keyId: string;
}

export interface Authenticator {
  /**
   * Checks the Authorization header. Resolves with the principal, or throws an AppError:
   * 401 UNAUTHORIZED (missing, malformed, unknown, revoked, expired, unknown organization),
   * 404 ORGANIZATION_NOT_CONFIGURED, 503 AUTH_UNAVAILABLE (key store unreachable, with Retry-After).
   */
  authenticate(authorizationHeader: string | undefined): Promise<Principal>;
}

/** A held slot of the per-organization concurrency limit. release() is idempotent. */
export interface Admission {
  release(): void;
}

export interface RateLimiter {
  /** Counts the request against the organization's limits; throws AppError 429 RATE_LIMITED when over. */
  admit(organizationId: string): Promise<Admission>;
}

/** State shared by gateway replicas (Redis), or in-process when REDIS_URL is unset. */
export interface SharedStoreStatus {
  backend: "redis" | "memory";
  /** False while Redis is configured but unreachable (limits fall back to per-replica). */
  healthy: boolean;
}

/** Published when limits switch between shared (Redis) and per-replica state, and back. */
export interface FallbackEvent {
  /** True while limits and caches are per-replica because the shared store is unavailable. */
  active: boolean;
  reason?: string;
}

export interface RateLimiterStatus {
  /** shared: counted across replicas; local: this replica alone (no REDIS_URL, or Redis down). */
  mode: "shared" | "local";
  store: SharedStoreStatus;
}

/** The rate limiter as the gateway's main.ts and metrics see it. */
export interface ManagedRateLimiter extends RateLimiter {
  status(): RateLimiterStatus;
  /**
   * Metric hook: called on every switch to and from per-replica limits, and at once when subscribing
   * while per-replica limits are in force. Returns the unsubscribe.
   */
  onFallback(listener: (event: FallbackEvent) => void): () => void;
  close(): Promise<void>;
}
