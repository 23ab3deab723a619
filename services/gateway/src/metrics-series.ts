import type Router from "@koa/router";
import { countFromZero, ERROR_CATALOGUE, STREAM_ABORT_REASONS } from "@exportsvc/common";
import type { GatewayMetrics } from "./metrics";

/**
 * The gateway's counters, every label set it knows at 0 from start-up, so each alert of the chart
 * (charts/dataset-export/rules/alerts.yaml) evaluates to 0 rather than to nothing before the first
 * event: problem responses for every code of the error catalogue, both rate limits, the refusal
 * reason, the auth cache results, who decided a 304, every stream abort reason, and for every route
 * the statuses the error alerts divide (429 and the 5xx of the catalogue).
 */
export function exposeGatewaySeries(metrics: GatewayMetrics, routers: readonly Router[]): void {
  const catalogue = Object.entries(ERROR_CATALOGUE).map(([errorCode, entry]) => ({ status: String(entry.status), error_code: errorCode }));
  countFromZero(metrics.problemResponses, catalogue);
  countFromZero(metrics.rateLimitRejections, [{ limit: "concurrency" }, { limit: "window" }]);
  countFromZero(metrics.httpConnectionsRefused, [{ reason: "max_connections" }]);
  countFromZero(metrics.authCacheLookups, [{ result: "hit" }, { result: "miss" }, { result: "negative_hit" }]);
  countFromZero(metrics.listingNotModified, [{ decided_by: "gateway" }, { decided_by: "catalog" }]);
  countFromZero(metrics.exportStreamAborts, STREAM_ABORT_REASONS.map((reason) => ({ reason })));
  const alertedStatuses = [...new Set(catalogue.map((c) => c.status).filter((status) => status === "429" || status.startsWith("5")))];
  const routes = routers.flatMap((router) => router.stack.filter((layer) => layer.methods.includes("GET")).map((layer) => String(layer.path)));
  countFromZero(
    metrics.httpRequests,
    routes.flatMap((route) => alertedStatuses.map((status) => ({ route, method: "GET", status }))),
  );
}
