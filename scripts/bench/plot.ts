/**
 * Charts for the benchmarks: a Vega-Lite spec compiled by vega-lite, rendered to SVG by vega's
 * headless View, rasterized to PNG by @resvg/resvg-js (both libraries ship everything they need; no
 * browser, no canvas build).
 */
import { writeFileSync } from "node:fs";
import { PLOT_PACKAGES, linkOnDemandPackage } from "../tools/on-demand";

export async function renderVegaLitePng(spec: Record<string, unknown>, pngPath: string, width = 1400): Promise<void> {
  // ESM-only packages (their typings need the bundler/node16 resolution this repo does not use),
  // loaded from this CommonJS script at run time.
  PLOT_PACKAGES.forEach(linkOnDemandPackage); // not in npm install: installed on first use
  const load = (name: string) => import(name) as Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  const vegaLite = await load("vega-lite");
  const vega = await load("vega");
  const { Resvg } = await import("@resvg/resvg-js");
  const compiled = vegaLite.compile(spec as never).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  const png = new Resvg(svg, { fitTo: { mode: "width", value: width }, background: "white", font: { loadSystemFonts: true } }).render().asPng();
  writeFileSync(pngPath, png);
}
