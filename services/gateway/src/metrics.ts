import { Counter, Gauge, ServiceMetrics, type MetricsOptions } from "@exportsvc/common";

export type RateLimitKind = "concurrency" | "window";
export type AuthCacheResult = "hit" | "miss" | "negative_hit";
/** Who decided a listing's 304: the gateway from a remembered settled version, or the catalog. */
export type NotModifiedDecider = "gateway" | "catalog";

/** The gateway's metric families, beside the HTTP and gRPC families every service shares. */
export class GatewayMetrics extends ServiceMetrics {
  readonly rateLimitRejections: Counter<"limit">;
  readonly authCacheLookups: Counter<"result">;
  readonly listingNotModified: Counter<"decided_by">;
  readonly sharedStoreFallback: Gauge;

  constructor(options: MetricsOptions = {}) {
    super(options);
    const registers = [this.registry];
    this.rateLimitRejections = new Counter({
      name: "ratelimit_rejections_total",
      help: "Requests rejected with 429, by the per-organization limit that was reached.",
      labelNames: ["limit"],
      registers,
    });
    this.listingNotModified = new Counter({
      name: "listing_not_modified_total",
      help: "Listing requests answered 304, by who decided it: the gateway from a settled listing version the catalog reported, or the catalog.",
      labelNames: ["decided_by"],
      registers,
    });
    this.authCacheLookups = new Counter({
      name: "auth_cache_lookups_total",
      help: "API key checks answered by the cache (hit, negative_hit) or the key store (miss).",
      labelNames: ["result"],
      registers,
    });
    this.sharedStoreFallback = new Gauge({
      name: "shared_store_fallback",
      help: "1 while Redis is configured but unreachable and limits/caches fall back to this replica's memory.",
      registers,
    });
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
