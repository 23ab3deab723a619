import { SchemaMetrics } from "../src/metrics";

/** Value of the first sample line matching name and every given label. */
function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

describe("SchemaMetrics", () => {
  it("registers the form maintenance families beside the shared ones", () => {
    const names = new SchemaMetrics({ defaultMetrics: false }).metricNames();
    for (const name of ["dataset_rebuild_duration_seconds", "dataset_rebuilds_total", "dataset_maintenance_lag_seconds", "grpc_server_handled_total", "build_info"]) {
      expect(names).toContain(name);
    }
  });

  it("records rebuilds by outcome and the maintenance lag (never negative)", async () => {
    const metrics = new SchemaMetrics({ defaultMetrics: false });
    metrics.observeRebuild("failure", 12);
    metrics.observeRebuild("success", 0.4);
    metrics.setMaintenanceLag(-3);
    let text = await metrics.registry.metrics();
    expect(sample(text, "dataset_rebuilds_total", { outcome: "failure" })).toBe(1);
    expect(sample(text, "dataset_rebuild_duration_seconds_bucket", { outcome: "failure", le: "10" })).toBe(0);
    expect(sample(text, "dataset_rebuild_duration_seconds_bucket", { outcome: "failure", le: "30" })).toBe(1);
    expect(sample(text, "dataset_maintenance_lag_seconds")).toBe(0);
    metrics.setMaintenanceLag(42.5);
    text = await metrics.registry.metrics();
    expect(sample(text, "dataset_maintenance_lag_seconds")).toBe(42.5);
  });

  it("exposes every rebuild outcome at 0 once the service that runs rebuilds starts them", async () => {
    const metrics = new SchemaMetrics({ defaultMetrics: false });
    expect(sample(await metrics.registry.metrics(), "dataset_rebuilds_total", { outcome: "success" })).toBeUndefined();
    metrics.initRebuildSeries();
    const text = await metrics.registry.metrics();
    for (const outcome of ["success", "failure", "superseded"]) expect(sample(text, "dataset_rebuilds_total", { outcome })).toBe(0);
  });
});
