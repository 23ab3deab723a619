import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHART_DIR } from "./lib/chart";
import { runAsScript } from "./lib/run-script";

/**
 * `npm run chart:readme`: regenerates the Parameters section of charts/dataset-export/README.md
 * from the `## @section` / `## @param` comments of values.yaml with Bitnami's
 * readme-generator-for-helm (a pinned devDependency). The generator refuses a values.yaml with a
 * value that has no @param (or a @param for no value), so every value is documented.
 *
 *   npm run chart:readme             # rewrite the README's Parameters section
 *   npm run chart:readme -- --check  # exit 1 when README.md is not what the generator writes
 */

export const CHART_README = join(CHART_DIR, "README.md");
export const CHART_VALUES = join(CHART_DIR, "values.yaml");

/** Thrown with the generator's own report (e.g. "ERROR: Missing metadata for key: gateway.port"). */
export class ChartReadmeError extends Error {}

/**
 * The README the generator makes of `readme` with the documentation of `values` (files left
 * untouched: it works on a copy). Line ends normalized to LF (the generator writes some CRLF).
 */
export function generateChartReadme(values = CHART_VALUES, readme = CHART_README): string {
  const dir = mkdtempSync(join(tmpdir(), "chart-readme-"));
  try {
    const copy = join(dir, "README.md");
    copyFileSync(readme, copy);
    const bin = require.resolve("@bitnami/readme-generator-for-helm/bin/index.js");
    const run = spawnSync(process.execPath, [bin, "--values", values, "--readme", copy], { encoding: "utf8" });
    if (run.status !== 0) {
      const report = `${run.stdout}${run.stderr}`.split("\n").filter((l) => l.startsWith("ERROR") || /Error:/.test(l));
      throw new ChartReadmeError(`readme-generator-for-helm failed on ${values}:\n${report.join("\n") || run.stderr}`);
    }
    return readFileSync(copy, "utf8").replace(/\r\n/g, "\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function main(argv: string[]): number {
  const generated = generateChartReadme();
  if (argv.includes("--check")) {
    if (generated === readFileSync(CHART_README, "utf8")) return 0;
    process.stderr.write("charts/dataset-export/README.md is stale: run `npm run chart:readme`\n");
    return 1;
  }
  writeFileSync(CHART_README, generated);
  process.stdout.write("charts/dataset-export/README.md: Parameters regenerated from values.yaml\n");
  return 0;
}

runAsScript(module, main);
