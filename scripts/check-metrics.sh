#!/usr/bin/env bash
# Lints a Prometheus exposition with `promtool check metrics` (naming conventions, HELP/TYPE,
# parseability).
#
#   scripts/check-metrics.sh                 # the shared, gateway and schema families, with a sample of every metric recorded
#   scripts/check-metrics.sh URL             # a running service, e.g. http://127.0.0.1:9464/metrics
#
# promtool comes with Debian's `prometheus` package:
#   apt-get update && apt-get install -y --no-install-recommends prometheus
# Without promtool the check is skipped with a message (exit 0); with it, lint problems fail (exit 1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v promtool >/dev/null 2>&1; then
  echo "check-metrics: SKIPPED - promtool not found. Install it with:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends prometheus" >&2
  exit 0
fi

exposition="$(mktemp)"
trap 'rm -f "$exposition"' EXIT

if [ $# -ge 1 ]; then
  curl -fsS --max-time 10 "$1" >"$exposition"
  source_name="$1"
else
  # Records one sample of every metric so labelled series and histograms appear in the exposition:
  # the shared families and the gateway's (GatewayMetrics), plus the schema and export services' own.
  (cd "$root" && node_modules/.bin/tsx -e '
    const { Registry } = require("prom-client");
    const { GatewayMetrics } = require("./services/gateway/src/metrics");
    const { SchemaMetrics } = require("./services/schema/src/metrics");
    const { ExportMetrics } = require("./services/export/src/metrics");
    const m = new GatewayMetrics({ build: { imageTag: "check", commit: "0000000", version: "0.0.0" } });
    m.observeHttpRequest({ route: "/v1/datasets/:key/csv", method: "GET", status: 200, durationSeconds: 0.5 });
    m.recordProblem(503, "AUTH_UNAVAILABLE");
    m.observeGrpcCall({ service: "exportsvc.v1.ExportService", method: "ExportCsv", code: "OK", durationSeconds: 0.4 });
    m.recordStreamAbort("client_disconnect");
    m.recordRateLimitRejection("window");
    m.recordAuthCacheLookup("hit");
    m.recordRefusedConnection("max_connections");
    m.observeOpenConnections(async () => 7);
    m.setSharedStoreFallback(false);
    m.observePool({ totalCount: 3, idleCount: 2, waitingCount: 0 });
    const schema = new SchemaMetrics({ defaultMetrics: false });
    schema.observeRebuild("success", 3);
    schema.setMaintenanceLag(1.5);
    const exp = new ExportMetrics({ defaultMetrics: false });
    exp.recordExport("submission", 5000, 1 << 20);
    exp.recordFormPage("stored");
    exp.observeVisibilityHorizonLag({ undeclared_writer: 0, declared_writer: 0, pending_changes: 2, reader_ignored: 0 });
    const own = new Registry();
    for (const r of [schema.registry, exp.registry])
      for (const metric of r.getMetricsAsArray()) if (!m.registry.getSingleMetric(metric.name) && !own.getSingleMetric(metric.name)) own.registerMetric(metric);
    Registry.merge([m.registry, own]).metrics().then((text) => process.stdout.write(text));
  ') >"$exposition"
  source_name="the shared, gateway, schema and export metric families (sample registry)"
fi

series="$(grep -cv '^#' "$exposition" || true)"
if problems="$(promtool check metrics <"$exposition" 2>&1)"; then
  echo "check-metrics: OK - ${source_name}: ${series} series pass promtool check metrics"
else
  echo "check-metrics: FAILED - ${source_name}:" >&2
  echo "$problems" >&2
  exit 1
fi
