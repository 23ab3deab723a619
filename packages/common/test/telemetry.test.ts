import { trace } from "@opentelemetry/api";
import type { tracing } from "@opentelemetry/sdk-node";
import { currentTraceId, initTelemetry, tracingConfigured } from "../src/telemetry";

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
  it("is a no-op without an exporter: no tracer provider, no trace id", async () => {
    const telemetry = initTelemetry("gateway", { env: {} });
    expect(telemetry.enabled).toBe(false);
    expect(initTelemetry("gateway", { env: { OTEL_TRACES_EXPORTER: "otlp" } })).toBe(telemetry);
    trace.getTracer("test").startActiveSpan("work", (span) => {
      expect(span.isRecording()).toBe(false);
      expect(currentTraceId()).toBeUndefined();
      span.end();
    });
    await telemetry.shutdown();
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
