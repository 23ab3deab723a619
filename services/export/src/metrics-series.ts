import { countFromZero, STREAM_ABORT_REASONS } from "@exportsvc/common";
import { EXPORT_FAMILIES, type ExportMetrics } from "./metrics";

/**
 * The export service's counters, every label set at 0 from start-up, so the chart's alerts on them
 * (export_stream_aborts_total by reason) evaluate to 0 rather than to nothing before the first event.
 */
export function exposeExportSeries(metrics: ExportMetrics): void {
  countFromZero(metrics.exportStreamAborts, STREAM_ABORT_REASONS.map((reason) => ({ reason })));
  countFromZero(metrics.exportRows, EXPORT_FAMILIES.map((family) => ({ family })));
  countFromZero(metrics.exportBytes, EXPORT_FAMILIES.map((family) => ({ family })));
}
