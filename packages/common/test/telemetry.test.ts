import { context, propagation, trace } from "@opentelemetry/api";
import { tracing } from "@opentelemetry/sdk-node";
import { createLogger } from "../src/logger";
import { currentTraceId, initTelemetry, tracingConfigured } from "../src/telemetry";

const CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID = "00f067aa0ba902b7";

/** A logger whose JSON lines are kept in memory. */
function capturedLogger(service: string) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger(service, "info", { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

/** Runs `fn` as the work of a request whose caller sent `traceparent` (what the HTTP/gRPC instrumentation does). */
function asRequestFrom<T>(traceparent: string, name: string, fn: () => T): T {
  const parent = propagation.extract(context.active(), { traceparent });
  return context.with(parent, () => trace.getTracer("test").startActiveSpan(name, (span) => {
    try {
      return fn();
    } finally {
      span.end();
    }
  }));
}

/** Collects exported span names (the SDK's in-memory exporter forgets them on shutdown). */
function recordingExporter(): tracing.SpanExporter & { names: string[] } {
  const names: string[] = [];
  return {
    names,
    export(spans, done) {
      names.push(...spans.map((s) => s.name));
      done({ code: 0 });
    },
    shutdown: async () => undefined,
  };
}

describe("tracingConfigured", () => {
  it.each([
    [{}, false],
    [{ OTEL_TRACES_EXPORTER: "none" }, false],
    [{ OTEL_TRACES_EXPORTER: "otlp" }, true],
    [{ OTEL_TRACES_EXPORTER: "console, none" }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel-collector:4318" }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://otel-collector:4318/v1/traces" }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "  " }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel-collector:4318", OTEL_TRACES_EXPORTER: "none" }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel-collector:4318", OTEL_SDK_DISABLED: "true" }, false],
  ])("%j -> %s", (env, expected) => {
    expect(tracingConfigured(env)).toBe(expected);
  });
});

describe("initTelemetry", () => {
  it("without an exporter propagates the caller's trace id into log lines, recording nothing", async () => {
    const telemetry = initTelemetry("export", { env: {} });
    expect({ enabled: telemetry.enabled, mode: telemetry.mode }).toEqual({ enabled: false, mode: "propagate" });
    expect(initTelemetry("export", { env: { OTEL_TRACES_EXPORTER: "otlp" } })).toBe(telemetry);
    const { log, lines } = capturedLogger("export");
    log.info("outside any request");
    asRequestFrom(`00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`, "ExportCsv", () => {
      expect(trace.getActiveSpan()?.isRecording()).toBe(false);
      expect(currentTraceId()).toBe(CLIENT_TRACE_ID);
      log.info("inside the request");
      // Outgoing calls carry the same trace id (the gRPC client instrumentation injects this).
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      expect(carrier.traceparent).toMatch(new RegExp(`^00-${CLIENT_TRACE_ID}-[0-9a-f]{16}-00$`));
    });
    // A request without traceparent still gets a trace id of its own.
    trace.getTracer("test").startActiveSpan("ListDatasets", (span) => {
      expect(currentTraceId()).toMatch(/^[0-9a-f]{32}$/);
      expect(currentTraceId()).not.toBe(CLIENT_TRACE_ID);
      span.end();
    });
    expect(lines.map((l) => [l.msg, l.traceId])).toEqual([
      ["outside any request", undefined],
      ["inside the request", CLIENT_TRACE_ID],
    ]);
    await telemetry.shutdown();
  });

  it("does nothing with OTEL_SDK_DISABLED=true: no trace id", async () => {
    const telemetry = initTelemetry("gateway", { env: { OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" } });
    expect(telemetry.mode).toBe("off");
    asRequestFrom(`00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`, "work", () => {
      expect(trace.getActiveSpan()?.isRecording() ?? false).toBe(false);
    });
    trace.getTracer("test").startActiveSpan("work", (span) => {
      expect(currentTraceId()).toBeUndefined();
      span.end();
    });
    await telemetry.shutdown();
  });

  it("with an exporter, log lines and exported spans share the caller's trace id (in-memory exporter)", async () => {
    const exporter = new tracing.InMemorySpanExporter();
    const telemetry = initTelemetry("catalog", { env: { OTEL_TRACES_EXPORTER: "otlp" }, traceExporter: exporter });
    expect(telemetry.mode).toBe("export");
    const { log, lines } = capturedLogger("catalog");
    let spanId: string | undefined;
    asRequestFrom(`00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`, "ListDatasets", () => {
      spanId = trace.getActiveSpan()?.spanContext().spanId;
      log.info("listing");
    });
    // Shutdown flushes the batch processor into the exporter; read the spans before it is reset.
    const finished: tracing.ReadableSpan[] = [];
    const original = exporter.export.bind(exporter);
    exporter.export = (spans, done) => {
      finished.push(...spans);
      original(spans, done);
    };
    await telemetry.shutdown();
    expect(lines).toEqual([expect.objectContaining({ msg: "listing", service: "catalog", traceId: CLIENT_TRACE_ID, spanId })]);
    expect(finished.map((s) => ({ name: s.name, traceId: s.spanContext().traceId, parent: s.parentSpanContext?.spanId }))).toEqual([
      { name: "ListDatasets", traceId: CLIENT_TRACE_ID, parent: CLIENT_SPAN_ID },
    ]);
  });

  it("traces when configured, exposing the active span's trace id", async () => {
    const exporter = recordingExporter();
    const telemetry = initTelemetry("catalog", { env: { OTEL_TRACES_EXPORTER: "otlp" }, traceExporter: exporter });
    expect(telemetry.enabled).toBe(true);
    expect(currentTraceId()).toBeUndefined();
    let seen: string | undefined;
    let expected: string | undefined;
    trace.getTracer("test").startActiveSpan("list datasets", (span) => {
      expect(span.isRecording()).toBe(true);
      seen = currentTraceId();
      expected = span.spanContext().traceId;
      span.end();
    });
    expect(seen).toMatch(/^[0-9a-f]{32}$/);
    expect(seen).toBe(expected);
    await telemetry.shutdown();
    expect(exporter.names).toContain("list datasets");
  });
});
