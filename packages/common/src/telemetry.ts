import { context, isSpanContextValid, propagation, trace } from "@opentelemetry/api";
import type { tracing } from "@opentelemetry/sdk-node";

/**
 * Distributed tracing with the OpenTelemetry NodeSDK, configured only by the standard OTEL_*
 * variables (exporter, endpoint, protocol, sampler, resource attributes, headers).
 *
 * With no exporter configured, the W3C trace context is still propagated (HTTP and gRPC
 * instrumentation, spans that are never recorded): every log line of a request carries its trace
 * id, the caller's `traceparent` one when it sent one, in each service it reaches. Nothing is
 * recorded or sent, so a developer machine or a test run never tries to reach a collector.
 * OTEL_SDK_DISABLED=true turns both off.
 *
 * Auto-instrumentation patches modules as they are `require`d: initTelemetry must run before the
 * service loads koa, @grpc/grpc-js or pg. Every service does it in its src/tracing.ts, which node
 * loads with `--import` before src/main.ts (see docs/observability.md and the bundling caveat).
 */

/** export: spans recorded and exported; propagate: trace context only (log correlation); off: OTEL_SDK_DISABLED. */
export type TelemetryMode = "export" | "propagate" | "off";

export interface Telemetry {
  /** True when spans are exported (an exporter is configured). */
  readonly enabled: boolean;
  readonly mode: TelemetryMode;
  /** Flushes pending spans and stops the SDK; a no-op when disabled. */
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  env?: Record<string, string | undefined>;
  /** Replaces the exporter chosen by OTEL_TRACES_EXPORTER (tests use an in-memory exporter). */
  traceExporter?: tracing.SpanExporter;
}

/** Open endpoints and scrapes are polled constantly by probes and Prometheus: tracing them is noise. */
const UNTRACED_PATHS = /^\/(health|metrics)(\/|\?|$)/;

/**
 * The process's running handle, kept on globalThis: a service's image runs two esbuild bundles
 * (dist/tracing.js, preloaded, and dist/main.js), each with its own copy of this module, and both
 * must see the one SDK the preload started.
 */
const ACTIVE = Symbol.for("exportsvc.telemetry.active");
const registry = globalThis as typeof globalThis & { [ACTIVE]?: Telemetry };

const listOf = (value: string | undefined): string[] =>
  (value ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== "");

/**
 * Whether the environment asks for trace export: OTEL_SDK_DISABLED wins; an explicit
 * OTEL_TRACES_EXPORTER other than "none" enables; otherwise an OTLP endpoint enables (the SDK's
 * default exporter is OTLP).
 */
export function tracingConfigured(env: Record<string, string | undefined> = process.env): boolean {
  if (listOf(env.OTEL_SDK_DISABLED).includes("true")) return false;
  const exporters = listOf(env.OTEL_TRACES_EXPORTER);
  if (exporters.length > 0) return exporters.some((e) => e !== "none");
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * Starts tracing for this process when configured; call it first thing in main. Idempotent: a
 * second call returns the first call's handle until it is shut down. OTEL_SERVICE_NAME, when set, overrides serviceName.
 */
export function initTelemetry(serviceName: string, options: TelemetryOptions = {}): Telemetry {
  const running = activeTelemetry();
  if (running) return running;
  const env = options.env ?? process.env;
  if (listOf(env.OTEL_SDK_DISABLED).includes("true")) return track("off", async () => undefined);
  if (!tracingConfigured(env)) return startPropagation();

  // Required here, not at the top: the SDK and its exporters take a noticeable time to load, which
  // every test and tool importing @exportsvc/common would otherwise pay.
  const { NodeSDK } = require("@opentelemetry/sdk-node") as typeof import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME?.trim() || serviceName,
    traceExporter: options.traceExporter,
    instrumentations: instrumentations("export"),
  });
  sdk.start();
  return track("export", () => sdk.shutdown().finally(unregisterGlobals));
}

/** Forgets the global tracer provider, context manager and propagator, so a later start registers its own. */
function unregisterGlobals(): void {
  trace.disable();
  context.disable();
  propagation.disable();
}

/** Makes the process's handle; shutting it down once frees initTelemetry for a new start. */
function track(mode: TelemetryMode, stop: () => Promise<void>): Telemetry {
  let stopped: Promise<void> | undefined;
  const handle: Telemetry = {
    enabled: mode === "export",
    mode,
    shutdown: () =>
      (stopped ??= stop()
        .catch(() => undefined)
        .finally(() => {
          if (registry[ACTIVE] === handle) registry[ACTIVE] = undefined;
        })),
  };
  registry[ACTIVE] = handle;
  return handle;
}

/** The handle initTelemetry returned in this process (e.g. in the tracing preload), until it is shut down. */
export function activeTelemetry(): Telemetry | undefined {
  return registry[ACTIVE];
}

/**
 * The instrumentations: HTTP and gRPC carry the context between services in both modes; koa and pg
 * spans only matter when spans are recorded.
 */
function instrumentations(mode: "export" | "propagate") {
  const { HttpInstrumentation } = require("@opentelemetry/instrumentation-http") as typeof import("@opentelemetry/instrumentation-http");
  const { GrpcInstrumentation } = require("@opentelemetry/instrumentation-grpc") as typeof import("@opentelemetry/instrumentation-grpc");
  const list = [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? "/"),
    }),
    new GrpcInstrumentation({
      // Kubernetes' gRPC probes call the health service every few seconds.
      ignoreGrpcMethods: [(name: string) => name === "Check" || name === "Watch"],
    }),
  ];
  if (mode === "propagate") return list;
  const { PgInstrumentation } = require("@opentelemetry/instrumentation-pg") as typeof import("@opentelemetry/instrumentation-pg");
  const { KoaInstrumentation } = require("@opentelemetry/instrumentation-koa") as typeof import("@opentelemetry/instrumentation-koa");
  // Background polling (registry, change log) would otherwise start a root trace per query.
  return [...list, new PgInstrumentation({ requireParentSpan: true }), new KoaInstrumentation()];
}

/**
 * Trace context without recording: a tracer provider that samples nothing (its spans still get ids
 * and carry the caller's trace id), the async-local context manager and the W3C propagator, with the
 * HTTP and gRPC instrumentations. No span processor, no exporter, no network.
 */
function startPropagation(): Telemetry {
  const { node, tracing } = require("@opentelemetry/sdk-node") as typeof import("@opentelemetry/sdk-node");
  const { registerInstrumentations } = require("@opentelemetry/instrumentation") as typeof import("@opentelemetry/instrumentation");
  const provider = new node.NodeTracerProvider({ sampler: new tracing.AlwaysOffSampler() });
  provider.register();
  const unregister = registerInstrumentations({ tracerProvider: provider, instrumentations: instrumentations("propagate") });
  return track("propagate", async () => {
    unregister();
    await provider.shutdown().finally(unregisterGlobals);
  });
}

/** The W3C trace id (32 hex digits) of the active span, or undefined outside a valid span. */
export function currentTraceId(): string | undefined {
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx && isSpanContextValid(ctx) ? ctx.traceId : undefined;
}
