/**
 * End to end: one request followed by its trace id through the four services as processes.
 * Without an exporter (the default) every service's log lines carry the caller's trace id; with an
 * OTLP exporter configured (pointed at a receiver in this test) the request is one trace: the
 * gateway's HTTP span, its gRPC client spans, the services' gRPC server spans and their PostgreSQL
 * spans, each parented inside the trace.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { startE2E, type E2E } from "../support/fixture";
import type { ServiceName } from "../../scripts/lib/stack";

const SERVICES: ServiceName[] = ["gateway", "catalog", "export", "schema"];
const STACK_TIMEOUT = 180_000;

interface LogLine {
  service: string;
  msg: string;
  traceId?: string;
  spanId?: string;
  grpcMethod?: string;
  [k: string]: unknown;
}

/** The JSON log lines a service process wrote so far. */
function logLines(e2e: E2E, service: ServiceName): LogLine[] {
  return e2e.stack.logs[service]
    .join("")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as LogLine);
}

async function eventually<T>(what: string, probe: () => T | undefined, seen: () => unknown, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; seen: ${JSON.stringify(seen(), null, 1).slice(0, 6000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const newTraceparent = () => {
  const traceId = randomBytes(16).toString("hex");
  const parentSpanId = randomBytes(8).toString("hex");
  return { traceId, parentSpanId, header: `00-${traceId}-${parentSpanId}-01` };
};

/** Lists datasets (the catalog syncs a new organization's registry through the schema service) and exports one page. */
async function requestsOf(e2e: E2E) {
  const org = await e2e.newOrganization();
  // The schema service's queue worker registers a new organization's datasets in the background;
  // once it has, an emptied registry makes the catalog call SyncDatasets within the request.
  const registered = async () =>
    (
      await e2e.pool.query<{ done: boolean }>(
        `SELECT NOT EXISTS (SELECT 1 FROM registry_sync_queue WHERE organization_id = $1)
            AND EXISTS (SELECT 1 FROM dataset_registry WHERE organization_id = $1) AS done`,
        [org.organizationId],
      )
    ).rows[0].done;
  const deadline = Date.now() + 30_000;
  while (!(await registered())) {
    if (Date.now() > deadline) throw new Error("the new organization was never registered");
    await new Promise((r) => setTimeout(r, 100));
  }
  await e2e.pool.query("DELETE FROM dataset_registry WHERE organization_id = $1", [org.organizationId]);
  const auth = { Authorization: `Bearer ${org.secret}` };
  const listing = newTraceparent();
  const page = newTraceparent();
  const listed = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { ...auth, traceparent: listing.header } });
  expect(listed.status).toBe(200);
  await listed.arrayBuffer();
  const csv = await fetch(`${e2e.baseUrl}/v1/datasets/deviations/csv?limit=10`, { headers: { ...auth, traceparent: page.header } });
  expect(csv.status).toBe(200);
  await csv.arrayBuffer();
  return { listing, page };
}

/** Waits until every named service logged a line with the trace id; returns those lines by service. */
async function linesWithTrace(e2e: E2E, traceId: string, services: ServiceName[]): Promise<Record<string, LogLine[]>> {
  return eventually(`log lines with trace ${traceId} from ${services.join(", ")}`, () => {
    const found = Object.fromEntries(services.map((s) => [s, logLines(e2e, s).filter((l) => l.traceId === traceId)]));
    return services.every((s) => found[s].length > 0) ? found : undefined;
  }, () => Object.fromEntries(services.map((s) => [s, logLines(e2e, s).slice(-6)])));
}

describe("one request, one trace id, across the services' logs (no exporter configured)", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E({ env: { LOG_LEVEL: "info" } });
  }, STACK_TIMEOUT);
  afterAll(() => e2e?.stop());

  it("logs the caller's traceparent trace id in the gateway, catalog, schema and export", async () => {
    const { listing, page } = await requestsOf(e2e);
    const listed = await linesWithTrace(e2e, listing.traceId, ["gateway", "catalog", "schema"]);
    expect(listed.gateway).toEqual(expect.arrayContaining([expect.objectContaining({ msg: "request", path: "/v1/datasets", status: 200 })]));
    expect(listed.catalog).toEqual(expect.arrayContaining([expect.objectContaining({ msg: "rpc", grpcMethod: "listDatasets", grpcCode: "OK" })]));
    expect(listed.schema).toEqual(expect.arrayContaining([expect.objectContaining({ msg: "rpc", grpcMethod: "syncDatasets", grpcCode: "OK" })]));
    const exported = await linesWithTrace(e2e, page.traceId, ["gateway", "export"]);
    expect(exported.gateway).toEqual(expect.arrayContaining([expect.objectContaining({ msg: "request", path: "/v1/datasets/deviations/csv", status: 200 })]));
    expect(exported.export).toEqual(expect.arrayContaining([expect.objectContaining({ msg: "rpc", grpcMethod: "exportCsv", grpcCode: "OK" })]));
    // Each request's lines carry only its own trace id.
    expect(logLines(e2e, "export").filter((l) => l.traceId === listing.traceId)).toEqual([]);
  });
});

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}
interface CollectedSpan extends OtlpSpan {
  service: string;
}

/** An OTLP/HTTP JSON trace receiver: what a collector would get. */
async function startReceiver(): Promise<{ server: Server; url: string; spans: CollectedSpan[] }> {
  const spans: CollectedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const rs of body.resourceSpans ?? []) {
          const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? "?";
          for (const ss of rs.scopeSpans ?? []) for (const span of ss.spans ?? []) spans.push({ ...span, service });
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans };
}

const SERVER = 2;
const CLIENT = 3;
const isPg = (s: CollectedSpan) => s.attributes?.some((a) => a.key === "db.system" || a.key === "db.system.name") ?? false;

describe("one request, one trace, when an exporter is configured", () => {
  let e2e: E2E;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  beforeAll(async () => {
    receiver = await startReceiver();
    e2e = await startE2E({
      env: {
        LOG_LEVEL: "info",
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_LOGS_EXPORTER: "none",
        OTEL_BSP_SCHEDULE_DELAY: "100",
      },
    });
  }, STACK_TIMEOUT);
  afterAll(async () => {
    await e2e?.stop();
    await new Promise((r) => receiver?.server.close(r));
  });

  /** The trace's spans once every expected part has arrived (exports are batched per process). */
  const traceOf = (traceId: string, complete: (spans: CollectedSpan[]) => boolean) =>
    eventually(`spans of trace ${traceId}`, () => {
      const spans = receiver.spans.filter((s) => s.traceId === traceId);
      return complete(spans) ? spans : undefined;
    }, () => receiver.spans.map((s) => `${s.traceId.slice(0, 6)} ${s.service} ${s.kind} ${s.name}`));

  /** Every span's parent is in the trace, except the root, whose parent is the caller's span. */
  function expectOneTree(spans: CollectedSpan[], callerSpanId: string) {
    const ids = new Set(spans.map((s) => s.spanId));
    const roots = spans.filter((s) => !ids.has(s.parentSpanId ?? ""));
    expect(roots.map((r) => ({ service: r.service, kind: r.kind, parent: r.parentSpanId }))).toEqual([{ service: "gateway", kind: SERVER, parent: callerSpanId }]);
  }

  /** The span's ancestors' services, nearest first. */
  function ancestry(spans: CollectedSpan[], span: CollectedSpan): string[] {
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const chain: string[] = [];
    for (let p = byId.get(span.parentSpanId ?? ""); p; p = byId.get(p.parentSpanId ?? "")) chain.push(`${p.service}:${p.kind}`);
    return chain;
  }

  it("gateway HTTP → gRPC → catalog and schema → PostgreSQL, and gateway → export → PostgreSQL, each one trace", async () => {
    const { listing, page } = await requestsOf(e2e);

    const listed = await traceOf(listing.traceId, (spans) =>
      ["catalog", "schema"].every((svc) => spans.some((s) => s.service === svc && isPg(s))) && spans.some((s) => s.service === "gateway" && s.kind === SERVER),
    );
    expectOneTree(listed, listing.parentSpanId);
    const catalogServer = listed.find((s) => s.service === "catalog" && s.kind === SERVER)!;
    expect(catalogServer.name).toMatch(/CatalogService\/ListDatasets/);
    const gatewayClient = listed.find((s) => s.spanId === catalogServer.parentSpanId)!;
    expect({ service: gatewayClient.service, kind: gatewayClient.kind }).toEqual({ service: "gateway", kind: CLIENT });
    const schemaServer = listed.find((s) => s.service === "schema" && s.kind === SERVER)!;
    expect(schemaServer.name).toMatch(/SchemaService\/SyncDatasets/);
    const catalogPg = listed.find((s) => s.service === "catalog" && isPg(s))!;
    expect(ancestry(listed, catalogPg)).toEqual(expect.arrayContaining([`catalog:${SERVER}`, `gateway:${CLIENT}`, `gateway:${SERVER}`]));

    const exported = await traceOf(page.traceId, (spans) => spans.some((s) => s.service === "export" && isPg(s)) && spans.some((s) => s.service === "gateway" && s.kind === SERVER));
    expectOneTree(exported, page.parentSpanId);
    const exportServer = exported.find((s) => s.service === "export" && s.kind === SERVER)!;
    expect(exportServer.name).toMatch(/ExportService\/ExportCsv/);
    expect(exported.find((s) => s.spanId === exportServer.parentSpanId)).toMatchObject({ service: "gateway", kind: CLIENT });

    // The services' log lines name spans of the same trace: logs and traces join.
    const lines = await linesWithTrace(e2e, listing.traceId, ["gateway", "catalog", "schema"]);
    const spanIds = new Set(listed.map((s) => s.spanId));
    for (const svc of ["catalog", "schema"]) {
      const rpc = lines[svc].find((l) => l.msg === "rpc")!;
      expect({ svc, spanInTrace: spanIds.has(rpc.spanId ?? "") }).toEqual({ svc, spanInTrace: true });
    }
    for (const svc of SERVICES) expect(receiver.spans.some((s) => s.service === svc)).toBe(true);
  });
});
