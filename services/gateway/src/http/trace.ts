import { randomBytes } from "node:crypto";
import { trace } from "@opentelemetry/api";

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;
const INVALID_TRACE_ID = "0".repeat(32);

/**
 * The W3C trace id of the request: the active OpenTelemetry span's (when instrumentation runs),
 * else the caller's `traceparent`, else a fresh one, so every problem body can be quoted to support.
 */
export function requestTraceId(traceparentHeader: string | string[] | undefined): string {
  const active = trace.getActiveSpan()?.spanContext().traceId;
  if (active && active !== INVALID_TRACE_ID) return active;
  const header = Array.isArray(traceparentHeader) ? traceparentHeader[0] : traceparentHeader;
  const match = header ? TRACEPARENT.exec(header.trim().toLowerCase()) : null;
  if (match && match[1] !== INVALID_TRACE_ID) return match[1];
  return randomBytes(16).toString("hex");
}
