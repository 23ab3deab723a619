import * as grpc from "@grpc/grpc-js";
import { currentTraceId } from "@exportsvc/common";

/**
 * A request's trace id across gRPC without OpenTelemetry. With tracing running (propagate or export
 * mode) the gRPC instrumentation injects the active context's `traceparent`, which replaces the one
 * set here (same trace id), and callTraceId prefers the active span: these two only matter where
 * the instrumentation does not run (OTEL_SDK_DISABLED=true, a process started without its tracing
 * preload, servers inside test processes), so that a 5xx is still logged with the problem body's id.
 */

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;
const INVALID_TRACE_ID = "0".repeat(32);

/** The trace id of a call: the active span's (when tracing runs), else the caller's `traceparent` metadata. */
export function callTraceId(metadata: grpc.Metadata): string | undefined {
  const active = currentTraceId();
  if (active) return active;
  const header = metadata.get("traceparent")[0];
  const match = typeof header === "string" ? TRACEPARENT.exec(header.trim().toLowerCase()) : null;
  return match && match[1] !== INVALID_TRACE_ID ? match[1] : undefined;
}

/** `traceparent` metadata carrying a request's trace id to the service it calls (a fresh span id, sampled flag off). */
export function traceMetadata(traceId: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (traceId && /^[0-9a-f]{32}$/.test(traceId)) metadata.set("traceparent", `00-${traceId}-${randomSpanId()}-00`);
  return metadata;
}

function randomSpanId(): string {
  let id = "";
  while (id.length < 16) id += Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, "0");
  return id === "0".repeat(16) ? "0000000000000001" : id.slice(0, 16);
}
