import pino, { type Logger } from "pino";
import { trace } from "@opentelemetry/api";

export type { Logger };

/** Structured JSON logs with the active trace id. Secrets are redacted by path. */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    redact: {
      paths: ["secret", "*.secret", "authorization", "*.authorization", "headers.authorization", "req.headers.authorization"],
      censor: "[redacted]",
    },
    mixin() {
      const span = trace.getActiveSpan();
      const ctx = span?.spanContext();
      return ctx ? { traceId: ctx.traceId, spanId: ctx.spanId } : {};
    },
  });
}
