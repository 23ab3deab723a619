import { writeFileSync } from "node:fs";
import type { InjectedFault } from "./faults";
import { PLOT_PACKAGES, linkOnDemandPackage } from "../tools/on-demand";

/**
 * The run's plot: sync lag of every row version that reached the copy (seconds, over the run's
 * time) and the faults injected (vertical rules, coloured by kind). vega-lite compiles the spec,
 * vega renders SVG, resvg turns it into the PNG.
 */
export async function plotRun(file: string, opts: { startedAt: number; lagPoints: { t: number; lagMs: number; org: string }[]; faults: InjectedFault[]; title: string }): Promise<void> {
  PLOT_PACKAGES.forEach(linkOnDemandPackage); // not in npm install: installed on first use
  // vega and vega-lite are ES modules only.
  const vega = await import("vega");
  // vega-lite's types sit behind package "exports" (not read by this repository's node10 resolution).
  const vl = (await import("vega-lite" as string)) as { compile(spec: unknown): { spec: unknown } };
  const { Resvg } = await import("@resvg/resvg-js");
  const lag = opts.lagPoints.map((p) => ({ second: (p.t - opts.startedAt) / 1000, lag: p.lagMs / 1000, org: p.org }));
  const faults = opts.faults.map((f) => ({ second: (f.startedAt - opts.startedAt) / 1000, end: (f.endedAt - opts.startedAt) / 1000, fault: f.kind }));
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: opts.title,
    width: 900,
    height: 360,
    background: "white",
    layer: [
      {
        data: { values: faults },
        mark: { type: "rule", strokeWidth: 1.5, opacity: 0.7 },
        encoding: {
          x: { field: "second", type: "quantitative", title: "seconds since the start of the run" },
          color: { field: "fault", type: "nominal", title: "fault injected", scale: { scheme: "category20" } },
        },
      },
      {
        data: { values: lag },
        mark: { type: "point", filled: true, size: 10, opacity: 0.5, color: "#333" },
        encoding: {
          x: { field: "second", type: "quantitative" },
          y: { field: "lag", type: "quantitative", title: "sync lag (s): source last_modified → row in the copy", scale: { type: "symlog" } },
        },
      },
    ],
  };
  const compiled = vl.compile(spec as never).spec;
  const view = new vega.View(vega.parse(compiled as never), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  const png = new Resvg(svg, { background: "white", font: { loadSystemFonts: true } }).render().asPng();
  writeFileSync(file, png);
}
