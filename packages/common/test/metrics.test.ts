import { request } from "node:http";
import { createMetrics, startMetricsServer, type PoolLike } from "../src/metrics";

/** The shared metric families (each service adds its own, tested beside it). */
const SYSTEM_METRICS = [
  "http_requests_total",
  "http_request_duration_seconds",
  "grpc_server_handled_total",
  "grpc_server_handling_seconds",
  "export_stream_aborts_total",
  "http_problem_responses_total",
  "http_connections_refused_total",
  "http_open_connections",
  "db_pool_connections",
  "build_info",
];

/** Label names that would make cardinality grow with tenants or data. */
const FORBIDDEN_LABELS = /org|tenant|dataset|key|path|url|cursor|user/i;

function get(port: number, path: string, method = "GET"): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"] ?? ""), body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Value of the first sample line matching name and every given label (order-insensitive). */
function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

describe("createMetrics", () => {
  it("registers the shared metric set, plus default process metrics", () => {
    const names = createMetrics().metricNames();
    for (const name of SYSTEM_METRICS) expect(names).toContain(name);
    expect(names).toContain("process_cpu_user_seconds_total");
    expect(names).toContain("nodejs_eventloop_lag_seconds");
    expect(names).toContain("nodejs_active_handles");
    expect(names).not.toContain("nodejs_active_handles_total");
    expect(createMetrics({ defaultMetrics: false }).metricNames()).not.toContain("process_cpu_user_seconds_total");
  });

  it("uses no label that grows with organizations or datasets, and follows naming conventions", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    for (const metric of await metrics.registry.getMetricsAsJSON()) {
      expect(metric.name).toMatch(/^[a-z_][a-z0-9_]*$/);
      if (String(metric.type) === "counter") expect(metric.name).toMatch(/_total$/);
      const labelNames = (metrics.registry.getSingleMetric(metric.name) as unknown as { labelNames: string[] }).labelNames;
      for (const label of labelNames) expect(label).not.toMatch(FORBIDDEN_LABELS);
    }
  });

  it("records HTTP RED by route pattern, collapsing unknown methods", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.observeHttpRequest({ route: "/v1/datasets/:key/csv", method: "get", status: 200, durationSeconds: 0.3 });
    metrics.observeHttpRequest({ route: "/v1/datasets/:key/csv", method: "GET", status: 200, durationSeconds: 0.02 });
    metrics.observeHttpRequest({ route: "", method: "PROPFIND", status: 404, durationSeconds: 0.001 });
    const text = await metrics.registry.metrics();
    expect(sample(text, "http_requests_total", { route: "/v1/datasets/:key/csv", method: "GET", status: "200" })).toBe(2);
    expect(sample(text, "http_requests_total", { route: "unmatched", method: "OTHER", status: "404" })).toBe(1);
    expect(sample(text, "http_request_duration_seconds_bucket", { route: "/v1/datasets/:key/csv", le: "0.025" })).toBe(1);
    expect(sample(text, "http_request_duration_seconds_count", { route: "/v1/datasets/:key/csv" })).toBe(2);
  });

  it("counts refused connections and reads the listener's open connections at scrape time", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    let open = 5;
    metrics.observeOpenConnections(async () => open);
    metrics.recordRefusedConnection("max_connections");
    metrics.recordRefusedConnection("max_connections");
    expect(sample(await metrics.registry.metrics(), "http_connections_refused_total", { reason: "max_connections" })).toBe(2);
    expect(sample(await metrics.registry.metrics(), "http_open_connections")).toBe(5);
    open = 9;
    expect(sample(await metrics.registry.metrics(), "http_open_connections")).toBe(9);
  });

  it("counts problem responses by status and errorCode, refusing free-form codes", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.recordProblem(503, "AUTH_UNAVAILABLE");
    metrics.recordProblem(503, "AUTH_UNAVAILABLE");
    metrics.recordProblem(500, "something went wrong for org 42");
    const text = await metrics.registry.metrics();
    expect(sample(text, "http_problem_responses_total", { status: "503", error_code: "AUTH_UNAVAILABLE" })).toBe(2);
    expect(sample(text, "http_problem_responses_total", { status: "500", error_code: "OTHER" })).toBe(1);
  });

  it("records stream aborts (unknown reasons as other) and the build", async () => {
    const metrics = createMetrics({ defaultMetrics: false, build: { imageTag: "1.2.3", commit: "abc123" } });
    metrics.recordStreamAbort("client_disconnect");
    metrics.recordStreamAbort("bogus" as never);
    const text = await metrics.registry.metrics();
    expect(sample(text, "export_stream_aborts_total", { reason: "client_disconnect" })).toBe(1);
    expect(sample(text, "export_stream_aborts_total", { reason: "other" })).toBe(1);
    expect(sample(text, "build_info", { image_tag: "1.2.3", commit: "abc123", version: "unknown" })).toBe(1);
    // The export's own families live with the export service (services/export/test/export-metrics.test.ts).
    expect(sample(text, "export_rows_total")).toBeUndefined();
  });

  it("reads pool connection counts at scrape time", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const pool: PoolLike = { totalCount: 4, idleCount: 1, waitingCount: 0 };
    metrics.observePool(pool);
    let text = await metrics.registry.metrics();
    expect(sample(text, "db_pool_connections", { pool: "main", state: "total" })).toBe(4);
    expect(sample(text, "db_pool_connections", { pool: "main", state: "idle" })).toBe(1);
    pool.totalCount = 10;
    pool.idleCount = 0;
    pool.waitingCount = 7;
    text = await metrics.registry.metrics();
    expect(sample(text, "db_pool_connections", { pool: "main", state: "total" })).toBe(10);
    expect(sample(text, "db_pool_connections", { pool: "main", state: "waiting" })).toBe(7);
  });
});

describe("startMetricsServer", () => {
  it("serves the exposition at /metrics only", async () => {
    const metrics = createMetrics();
    metrics.recordStreamAbort("timeout");
    const server = await startMetricsServer(0, metrics.registry, "127.0.0.1");
    try {
      const ok = await get(server.port, "/metrics");
      expect(ok.status).toBe(200);
      expect(ok.type).toContain("text/plain");
      expect(ok.type).toContain("version=0.0.4");
      expect(sample(ok.body, "export_stream_aborts_total", { reason: "timeout" })).toBe(1);
      expect(ok.body).toContain("# TYPE http_request_duration_seconds histogram");
      // Every line is a comment or a sample: name{labels} value (prom-client writes NaN as "Nan",
      // which Prometheus' float parser accepts).
      for (const line of ok.body.split("\n").filter((l) => l !== "")) {
        expect(line).toMatch(/^(# (HELP|TYPE) .+|[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? (-?[0-9.e+-]+|[+-]?Inf|NaN|Nan))$/);
      }
      expect((await get(server.port, "/metrics?x=1")).status).toBe(200);
      expect((await get(server.port, "/")).status).toBe(404);
      expect((await get(server.port, "/metrics", "POST")).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});
