import { metricsText } from "./resources";

/**
 * The gateway's own account of how long it took to answer (http_request_duration_seconds, from its
 * /metrics), beside the latency the soak's consumers measure. The consumers share one event loop
 * with the generator and every copy's client, so a response can wait there before it is timed; the
 * gateway's histogram has no such wait in it. Counts are cumulative, so the share of one period is
 * the difference of two readings.
 */
export type BucketCounts = Map<number, number>;

/** Cumulative counts by upper bound (seconds; +Inf as Infinity) of one route's requests, over every method and status. */
export function routeBuckets(metricsText: string, route: string): BucketCounts {
  const counts: BucketCounts = new Map();
  const line = /^http_request_duration_seconds_bucket\{([^}]*)\} ([0-9.e+]+)$/gm;
  for (const m of metricsText.matchAll(line)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (labels.route !== route || labels.le === undefined) continue;
    const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
    counts.set(le, (counts.get(le) ?? 0) + Number(m[2]));
  }
  return counts;
}

export async function readRouteBuckets(metricsPort: number, route: string): Promise<BucketCounts | null> {
  try {
    return routeBuckets(await metricsText(metricsPort), route);
  } catch {
    return null;
  }
}

export interface ServerLatency {
  requests: number;
  /** Share of the requests answered within `withinSeconds` (0..1), null without requests. */
  shareWithin: number | null;
  withinSeconds: number;
  /** The smallest bucket bound that holds 99 % of the requests (seconds), null without requests. */
  p99AtMostSeconds: number | null;
}

/** Between two readings (`before` null: from the start). */
export function serverLatencyBetween(before: BucketCounts | null, after: BucketCounts, withinSeconds: number): ServerLatency {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const inPeriod = (le: number) => (after.get(le) ?? 0) - (before?.get(le) ?? 0);
  const requests = inPeriod(Infinity);
  if (requests <= 0) return { requests: 0, shareWithin: null, withinSeconds, p99AtMostSeconds: null };
  const p99 = bounds.find((le) => inPeriod(le) >= 0.99 * requests) ?? Infinity;
  return { requests, shareWithin: inPeriod(withinSeconds) / requests, withinSeconds, p99AtMostSeconds: p99 };
}
