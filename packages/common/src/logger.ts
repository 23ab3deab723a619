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

interface EndableDestination {
  end(): void;
  once(event: "close", listener: () => void): unknown;
  destroyed?: boolean;
}

const isEndable = (stream: unknown): stream is EndableDestination =>
  typeof stream === "object" && stream !== null && typeof (stream as EndableDestination).end === "function" && typeof (stream as EndableDestination).once === "function";

/**
 * Calls `done` once every line logged so far has reached the destination, which is then closed
 * (for a process about to exit). pino's `flush(cb)` does not do this: with the default
 * asynchronous destination it calls back at once, and the synchronous flush pino runs at exit
 * then writes the queued lines ahead of a write still waiting in libuv's pool, so a line such as
 * "stopping" would appear after "unclean stop". Ending the destination waits for that write.
 */
export function endLogs(log: Logger, done: () => void): void {
  const stream: unknown = (log as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];
  if (!isEndable(stream) || stream.destroyed) {
    done();
    return;
  }
  stream.once("close", done);
  stream.end();
}
