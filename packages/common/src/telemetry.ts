import { isSpanContextValid, trace } from "@opentelemetry/api";
import type { tracing } from "@opentelemetry/sdk-node";

/**
 * Distributed tracing with the OpenTelemetry NodeSDK, configured only by the standard OTEL_*
 * variables (exporter, endpoint, protocol, sampler, resource attributes, headers). With none of
 * them set it does nothing, so a developer machine or a test run never tries to reach a collector.
 *
 * Auto-instrumentation patches modules as they are `require`d: call initTelemetry before the
 * service loads koa, @grpc/grpc-js or pg (see docs/observability.md for the import order and for
 * the bundling caveat).
 */

export interface Telemetry {
  /** True when the SDK was started (an exporter is configured). */
  readonly enabled: boolean;
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

let active: Telemetry | undefined;

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
  if (active) return active;
  const env = options.env ?? process.env;
  if (!tracingConfigured(env)) {
    const disabled: Telemetry = {
      enabled: false,
      shutdown: async () => {
        if (active === disabled) active = undefined;
      },
    };
    active = disabled;
    return disabled;
  }
  // Loaded only when tracing is on: the SDK and its exporters take a noticeable time to require,
  // which every process and test importing @exportsvc/common would otherwise pay.
  const { NodeSDK } = require("@opentelemetry/sdk-node") as typeof import("@opentelemetry/sdk-node");
  const { HttpInstrumentation } = require("@opentelemetry/instrumentation-http") as typeof import("@opentelemetry/instrumentation-http");
  const { GrpcInstrumentation } = require("@opentelemetry/instrumentation-grpc") as typeof import("@opentelemetry/instrumentation-grpc");
  const { PgInstrumentation } = require("@opentelemetry/instrumentation-pg") as typeof import("@opentelemetry/instrumentation-pg");
  const { KoaInstrumentation } = require("@opentelemetry/instrumentation-koa") as typeof import("@opentelemetry/instrumentation-koa");
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME?.trim() || serviceName,
    traceExporter: options.traceExporter,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? "/"),
      }),
      new GrpcInstrumentation({
        // Kubernetes' gRPC probes call the health service every few seconds.
        ignoreGrpcMethods: [(name: string) => name === "Check" || name === "Watch"],
      }),
      // Background polling (registry, change log) would otherwise start a root trace per query.
      new PgInstrumentation({ requireParentSpan: true }),
      new KoaInstrumentation(),
    ],
  });
  sdk.start();
  let stopped: Promise<void> | undefined;
  const started: Telemetry = {
    enabled: true,
    shutdown: () =>
      (stopped ??= sdk
        .shutdown()
        .catch(() => undefined)
        .finally(() => {
          if (active === started) active = undefined;
        })),
  };
  active = started;
  return started;
}

/** The W3C trace id (32 hex digits) of the active span, or undefined outside a valid span. */
export function currentTraceId(): string | undefined {
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx && isSpanContextValid(ctx) ? ctx.traceId : undefined;
}
