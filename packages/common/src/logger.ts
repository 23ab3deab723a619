import pino, { type DestinationStream, type Logger } from "pino";
import { isSpanContextValid, trace } from "@opentelemetry/api";

export type { Logger };

/**
 * Structured JSON logs with the active trace id (every line written inside a request's context:
 * the caller's trace id even when spans are not exported, see telemetry.ts). Secrets are redacted
 * by path. Lines go to stdout unless a destination is given (tests).
 */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info", destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name: service,
    level,
    base: { service },
    redact: {
      paths: ["secret", "*.secret", "authorization", "*.authorization", "headers.authorization", "req.headers.authorization"],
      censor: "[redacted]",
    },
    mixin() {
      const ctx = trace.getActiveSpan()?.spanContext();
      return ctx && isSpanContextValid(ctx) ? { traceId: ctx.traceId, spanId: ctx.spanId } : {};
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
