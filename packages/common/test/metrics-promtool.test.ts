import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";
import { createMetrics } from "../src/metrics";

/** `promtool check metrics` over the shared registry (the services' own families: scripts/check-metrics.sh), when promtool is installed (CI installs it). */
function promtoolAvailable(): boolean {
  return spawnSync("promtool", ["--version"], { stdio: "ignore" }).status === 0;
}

describe("the exposition passes promtool check metrics", () => {
  it("with a sample of every metric recorded (parser check always, promtool lint when installed)", async () => {
    const metrics = createMetrics({ build: { imageTag: "t", commit: "c", version: "v" } });
    metrics.observeHttpRequest({ route: "/v1/datasets", method: "GET", status: 200, durationSeconds: 0.01 });
    metrics.recordProblem(429, "RATE_LIMITED");
    metrics.observeGrpcCall({ service: "exportsvc.v1.CatalogService", method: "ListDatasets", code: "OK", durationSeconds: 0.01 });
    metrics.recordStreamAbort("timeout");
    metrics.recordRefusedConnection("max_connections");
    metrics.observeOpenConnections(async () => 3);
    metrics.observePool({ totalCount: 1, idleCount: 1, waitingCount: 0 });
    const exposition = await metrics.registry.metrics();
    // Every sample's family is declared with HELP and TYPE.
    const declared = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    for (const line of exposition.split("\n").filter((l) => l && !l.startsWith("#"))) {
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0];
      const family = name.replace(/_(bucket|sum|count)$/, "");
      expect(declared.has(name) || declared.has(family)).toBe(true);
    }
    if (promtoolAvailable()) {
      const result = spawnSync("promtool", ["check", "metrics"], { input: exposition, encoding: "utf8" });
      expect({ status: result.status, problems: `${result.stdout}${result.stderr}`.trim() }).toEqual({ status: 0, problems: "" });
    } else {
      expect(() => execFileSync("promtool", ["--version"], { stdio: "ignore" })).toThrow();
    }
  });
});

describe("scripts/check-metrics.sh", () => {
  it("lints the registry's exposition with promtool, or says how to install it", () => {
    const script = join(__dirname, "..", "..", "..", "scripts", "check-metrics.sh");
    const result = spawnSync("bash", [script], { encoding: "utf8", timeout: 60_000 });
    expect(result.status).toBe(0);
    if (promtoolAvailable()) {
      expect(result.stdout).toMatch(/check-metrics: OK - .*: \d+ series pass promtool check metrics/);
    } else {
      expect(result.stderr).toContain("SKIPPED - promtool not found");
      expect(result.stderr).toContain("apt-get install -y --no-install-recommends prometheus");
    }
  });
});
