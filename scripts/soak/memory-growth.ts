/**
 * The soak's leak rule (docs/soak.md, "Memory"): each service's RSS at the end against minute 5.
 *
 * A service's RSS is a saw-tooth: V8 lets the old generation grow to twice its live size before a
 * full collection (`--heap-growing-percent=100`) and then gives the pages back, so two single
 * samples ten seconds apart can differ by 40 %. What a leak raises is the floor the collections
 * come back to. So the rule compares floors: the lowest RSS from minute 5 to the middle of the rest
 * of the run against the lowest RSS from there to the end. Each half must hold a full collection:
 * at the soak's load the schema service collects every ~15 minutes, so halves of 12.5 minutes (a
 * 30-minute run) are the shortest that do; windows of 4 minutes were not. The single samples at
 * minute 5 and at the end are reported too.
 */
export interface RssSample {
  /** Seconds since the run started. */
  t: number;
  services: { service: string; rssBytes: number | null }[];
}

export interface RssGrowth {
  service: string;
  /** Minute of the baseline (5, or the middle of a shorter run). */
  baselineMinute: number;
  /** Length of each window (half of the run from the baseline on), seconds. */
  windowSeconds: number;
  /** The lowest RSS in the first and in the second half of the run from the baseline on. */
  baselineFloorBytes: number | null;
  endFloorBytes: number | null;
  /** The floors' growth, percent: what the target judges. */
  growthPercent: number | null;
  /** The single samples at the baseline and at the end, and their growth (reported, not judged). */
  baselineBytes: number | null;
  endBytes: number | null;
  sampleGrowthPercent: number | null;
}

export function rssGrowth(samples: RssSample[], services: readonly string[], baselineT: number): RssGrowth[] {
  const last = samples.length ? samples[samples.length - 1].t : 0;
  const window = Math.max(0, (last - baselineT) / 2);
  const baselineSample = samples.find((s) => s.t >= baselineT) ?? samples[0];
  const endSample = samples[samples.length - 1];
  const rss = (s: RssSample | undefined, service: string) => s?.services.find((x) => x.service === service)?.rssBytes ?? null;
  const floor = (service: string, from: number, to: number): number | null => {
    const values = samples.filter((s) => s.t >= from && s.t <= to).map((s) => rss(s, service)).filter((v): v is number => v !== null);
    return values.length ? Math.min(...values) : null;
  };
  const growth = (b: number | null, e: number | null) => (b && e !== null ? ((e - b) / b) * 100 : null);
  return services.map((service) => {
    const baselineFloorBytes = floor(service, baselineT, baselineT + window);
    const endFloorBytes = floor(service, last - window, last);
    const baselineBytes = rss(baselineSample, service);
    const endBytes = rss(endSample, service);
    return {
      service,
      baselineMinute: Math.round((baselineSample?.t ?? 0) / 6) / 10,
      windowSeconds: window,
      baselineFloorBytes,
      endFloorBytes,
      growthPercent: growth(baselineFloorBytes, endFloorBytes),
      baselineBytes,
      endBytes,
      sampleGrowthPercent: growth(baselineBytes, endBytes),
    };
  });
}
