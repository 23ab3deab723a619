import { ExportMetrics } from "../src/metrics";
import { exposeExportSeries } from "../src/metrics-series";

/** One sample's value from an exposition, or undefined when the series is absent. */
function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

describe("ExportMetrics", () => {
  it("holds the shared families and the export's own", () => {
    const names = new ExportMetrics({ defaultMetrics: false }).metricNames();
    for (const name of ["http_requests_total", "grpc_server_handled_total", "export_stream_aborts_total", "export_rows_total", "export_bytes_total", "export_form_pages_total", "export_visibility_horizon_lag_seconds"]) {
      expect(names).toContain(name);
    }
  });

  it("records export volume per family and form page cursors by source", async () => {
    const metrics = new ExportMetrics({ defaultMetrics: false });
    metrics.recordExport("grid", 5000, 1_048_576);
    metrics.recordExport("grid", 10, 2048);
    metrics.recordExport("resource", 0, 0);
    metrics.exposeFormPages();
    metrics.recordFormPage("stored");
    metrics.recordFormPage("stored");
    const text = await metrics.registry.metrics();
    expect(sample(text, "export_rows_total", { family: "grid" })).toBe(5010);
    expect(sample(text, "export_bytes_total", { family: "grid" })).toBe(1_050_624);
    expect(sample(text, "export_rows_total", { family: "resource" })).toBeUndefined();
    expect(sample(text, "export_form_pages_total", { source: "stored" })).toBe(2);
    expect(sample(text, "export_form_pages_total", { source: "signed" })).toBe(0);
  });

  it("starts every known label set at 0 (exposeExportSeries) and every horizon holder at 0", async () => {
    const metrics = new ExportMetrics({ defaultMetrics: false });
    exposeExportSeries(metrics);
    const text = await metrics.registry.metrics();
    for (const family of ["resource", "deviations", "submission", "grid"]) expect(sample(text, "export_rows_total", { family })).toBe(0);
    expect(sample(text, "export_stream_aborts_total", { reason: "stalled" })).toBe(0);
    expect(sample(text, "export_visibility_horizon_lag_seconds", { holder: "pending_changes" })).toBe(0);
    metrics.observeVisibilityHorizonLag({ undeclared_writer: -1, declared_writer: 0, pending_changes: 2.5, reader_ignored: 0 });
    const after = await metrics.registry.metrics();
    expect(sample(after, "export_visibility_horizon_lag_seconds", { holder: "pending_changes" })).toBe(2.5);
    expect(sample(after, "export_visibility_horizon_lag_seconds", { holder: "undeclared_writer" })).toBe(0);
  });
});
