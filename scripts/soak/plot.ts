import { renderVegaLitePng } from "../bench/plot";
import type { SoakReport } from "./run";

/**
 * The soak's plot: per 10-second sample, listing and page (time to first byte) latency p50/p99 on
 * top, each service's RSS and PostgreSQL's private backend memory below, minutes on the x axis.
 */
export async function plotSoak(file: string, r: SoakReport): Promise<void> {
  const latency: { minute: number; series: string; ms: number }[] = [];
  const memory: { minute: number; series: string; mb: number }[] = [];
  for (const s of r.samples) {
    const minute = s.t / 60;
    for (const [endpoint, label] of [["listing", "listing"], ["page", "page TTFB"]] as const) {
      const e = s.endpoints[endpoint];
      if (e?.p50 != null) latency.push({ minute, series: `${label} p50`, ms: e.p50 });
      if (e?.p99 != null) latency.push({ minute, series: `${label} p99`, ms: e.p99 });
    }
    for (const svc of s.services) if (svc.rssBytes != null) memory.push({ minute, series: `${svc.service} RSS`, mb: svc.rssBytes / 2 ** 20 });
    const pg = s.postgres.reduce((n, g) => n + g.anonBytes, 0);
    if (s.postgres.length) memory.push({ minute, series: "PostgreSQL backends (private, all)", mb: pg / 2 ** 20 });
  }
  const o = r.options;
  const x = { field: "minute", type: "quantitative", title: "minutes since the start of the run" };
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: `soak: ${o.minutes} min × ${o.orgs} organizations, ${o.rate} changes/s, faults ${o.faults ? "on" : "off"} (${r.serverErrors} responses ≥ 500; verdict ${r.passed ? "PASS" : "FAIL"})`,
    background: "white",
    vconcat: [
      {
        width: 900,
        height: 260,
        data: { values: latency },
        mark: { type: "line", point: false },
        encoding: { x, y: { field: "ms", type: "quantitative", title: "latency per 10 s (ms)", scale: { type: "log" } }, color: { field: "series", type: "nominal", title: null, legend: { labelLimit: 320 } } },
      },
      {
        width: 900,
        height: 260,
        data: { values: memory },
        mark: { type: "line" },
        encoding: { x, y: { field: "mb", type: "quantitative", title: "memory (MB)" }, color: { field: "series", type: "nominal", title: null, legend: { labelLimit: 320 } } },
      },
    ],
    resolve: { scale: { color: "independent" } },
  };
  await renderVegaLitePng(spec, file, 1100);
}
