/**
 * `npm run bench:storage` on a few rows: it runs through (the stack, the three form scenarios) and
 * ends with exactly one `RATIO <name> <value>` line per ratio of issue 27 it measures, the form
 * scripts read. Speed is not asserted (ratios on 2 000 rows mean nothing): only the output's form.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { testDatabaseUrl } from "../support/db";
import { syncRatioLines } from "../../scripts/bench/storage";

const ROOT = join(__dirname, "..", "..");

function runBench(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/bench/storage.ts"], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("bench:storage", () => {
  it("ends with one RATIO line per measured ratio, in the form scripts read", async () => {
    const { code, stdout, stderr } = await runBench({
      DATABASE_URL: testDatabaseUrl(),
      BENCH_DATABASE_NAME: "exportsvc_bench_storage_test",
      BENCH_ROWS: "2000",
      BENCH_LIMIT: "500",
      BENCH_RUNS: "1",
    });
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    const lines = stdout.trimEnd().split("\n");
    const ratios = lines.filter((l) => l.startsWith("RATIO"));
    // The ratio lines close the output, one per name, each exactly `RATIO <name> <positive decimal>`.
    expect(lines.slice(-ratios.length)).toEqual(ratios);
    for (const line of ratios) expect(line).toMatch(/^RATIO [a-z_]+ [0-9]+\.[0-9]+$/);
    expect(ratios.map((l) => l.split(" ")[1])).toEqual([
      "resources_http_vs_flat",
      "deviations_http_vs_flat",
      "forms_http_vs_table_clean",
      "forms_http_vs_table_imported",
      "forms_http_vs_table_backlog",
      "sync_postgres_vs_http_resources",
      "sync_postgres_vs_http_grid",
      "sync_sqlite_vs_http_resources",
      "sync_sqlite_vs_http_grid",
      "sync_duckdb_vs_http_resources",
      "sync_duckdb_vs_http_grid",
    ]);
    for (const line of ratios) expect(Number(line.split(" ")[2])).toBeGreaterThan(0);
    // Before them, each ratio's ceiling at the CPU its path cost, in the same order: "n/a" where a
    // path this short took less CPU than /proc counts (10 ms ticks).
    const ceilings = lines.filter((l) => l.startsWith("CEILING"));
    expect(ceilings.map((l) => l.split(" ")[1])).toEqual(ratios.map((l) => l.split(" ")[1]));
    for (const line of ceilings) expect(line).toMatch(/^CEILING [a-z_]+ ([0-9]+\.[0-9]+|n\/a)$/);
    // Each limit is a flat table of the width it bounds: the deviations' rows (43 columns) are wider
    // than the suppliers' (21), and the deviations' paths are measured against their own.
    const bytesARow = (path: string) => Number(new RegExp(`^  ${path} +[0-9,]+ rows/s \\(([0-9]+) bytes a row\\)`, "m").exec(stdout)?.[1]);
    expect(bytesARow("deviations flat")).toBeGreaterThan(1.3 * bytesARow("flat"));
    expect(stdout).toMatch(/^  deviations HTTP +[0-9,]+ rows\/s +ratio [0-9.]+x over deviations flat /m);
    expect(stdout).toMatch(/^  resources HTTP +[0-9,]+ rows\/s +ratio [0-9.]+x over flat /m);
  }, 300_000);
});

describe("syncRatioLines", () => {
  it("names each target's resources and grid ratio as issue 27 spells them", () => {
    const r = (ratio: number, ceiling: number) => ({ ratio, ceiling });
    const lines = syncRatioLines({
      postgres: { resources: r(0.8, 1.1), grid: r(0.75, 0.9) },
      sqlite: { resources: r(0.6, 0.7), grid: r(0.55, NaN) },
      duckdb: { resources: r(0.9, 1.2), grid: r(0.7, 0.8) },
    });
    expect(lines).toEqual([
      { name: "sync_postgres_vs_http_resources", value: 0.8, ceiling: 1.1 },
      { name: "sync_postgres_vs_http_grid", value: 0.75, ceiling: 0.9 },
      { name: "sync_sqlite_vs_http_resources", value: 0.6, ceiling: 0.7 },
      { name: "sync_sqlite_vs_http_grid", value: 0.55, ceiling: NaN },
      { name: "sync_duckdb_vs_http_resources", value: 0.9, ceiling: 1.2 },
      { name: "sync_duckdb_vs_http_grid", value: 0.7, ceiling: 0.8 },
    ]);
  });
});
