import { ServiceMetrics, type MetricsOptions } from "@exportsvc/common";

export type RateLimitKind = "concurrency" | "window";
export type AuthCacheResult = "hit" | "miss" | "negative_hit";
/** Who decided a listing's 304: the gateway from a remembered settled version, or the catalog. */
export type NotModifiedDecider = "gateway" | "catalog";

/** The gateway's metric families, beside the HTTP and gRPC families every service shares. */
export class GatewayMetrics extends ServiceMetrics {
  // Declared in registration order (the order of the scrape).
  readonly rateLimitRejections = this.counter("ratelimit_rejections_total", "Requests rejected with 429, by the per-organization limit that was reached.", ["limit"]);
  readonly listingNotModified = this.counter("listing_not_modified_total", "Listing requests answered 304, by who decided it: the gateway from a settled listing version the catalog reported, or the catalog.", ["decided_by"]);
  readonly authCacheLookups = this.counter("auth_cache_lookups_total", "API key checks answered by the cache (hit, negative_hit) or the key store (miss).", ["result"]);
  readonly sharedStoreFallback = this.gauge("shared_store_fallback", "1 while Redis is configured but unreachable and limits/caches fall back to this replica's memory.");

  constructor(options: MetricsOptions = {}) {
    super(options);
    this.sharedStoreFallback.set(0);
  }

  recordRateLimitRejection(limit: RateLimitKind): void {
    this.rateLimitRejections.inc({ limit });
  }

  recordListingNotModified(decidedBy: NotModifiedDecider): void {
    this.listingNotModified.inc({ decided_by: decidedBy });
  }

  recordAuthCacheLookup(result: AuthCacheResult): void {
    this.authCacheLookups.inc({ result });
  }

  setSharedStoreFallback(active: boolean): void {
    this.sharedStoreFallback.set(active ? 1 : 0);
  }
}
