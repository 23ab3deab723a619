import { GatewayMetrics } from "../src/metrics";

/** Value of the first sample line matching name and every given label. */
function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

describe("GatewayMetrics", () => {
  it("registers the gateway's families beside the shared ones, with no label that grows with organizations", () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const names = metrics.metricNames();
    for (const name of ["ratelimit_rejections_total", "auth_cache_lookups_total", "listing_not_modified_total", "shared_store_fallback", "http_requests_total", "build_info"]) {
      expect(names).toContain(name);
    }
    for (const name of ["ratelimit_rejections_total", "auth_cache_lookups_total", "listing_not_modified_total"]) {
      const labelNames = (metrics.registry.getSingleMetric(name) as unknown as { labelNames: string[] }).labelNames;
      for (const label of labelNames) expect(label).not.toMatch(/org|tenant|dataset|key|path|url|cursor|user/i);
    }
  });

  it("records limits, auth cache, who decided a 304 and the Redis fallback", async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    metrics.recordRateLimitRejection("concurrency");
    metrics.recordAuthCacheLookup("negative_hit");
    metrics.recordListingNotModified("gateway");
    metrics.recordListingNotModified("gateway");
    metrics.recordListingNotModified("catalog");
    metrics.setSharedStoreFallback(true);
    let text = await metrics.registry.metrics();
    expect(sample(text, "ratelimit_rejections_total", { limit: "concurrency" })).toBe(1);
    expect(sample(text, "listing_not_modified_total", { decided_by: "gateway" })).toBe(2);
    expect(sample(text, "listing_not_modified_total", { decided_by: "catalog" })).toBe(1);
    expect(sample(text, "auth_cache_lookups_total", { result: "negative_hit" })).toBe(1);
    expect(sample(text, "shared_store_fallback")).toBe(1);
    metrics.setSharedStoreFallback(false);
    text = await metrics.registry.metrics();
    expect(sample(text, "shared_store_fallback")).toBe(0);
  });
});
