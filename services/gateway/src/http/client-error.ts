import type { Server } from "node:http";
import type { Socket } from "node:net";
import { Errors, type AppError, type Logger, type ServiceMetrics } from "@exportsvc/common";
import { PROBLEM_CONTENT_TYPE, problemBody } from "./problem";
import { requestTraceId } from "./trace";

export interface MalformedRequestOptions {
  typeBaseUrl?: string;
  logger?: Logger;
  metrics?: ServiceMetrics;
}

/** The `route` label of requests answered before routing (the metric's closed label set). */
export const UNPARSED_ROUTE = "unparsed";

/** Longest request target reported as `instance`; a longer one is cut. */
const INSTANCE_MAX = 2048;
const REQUEST_LINE = /^([A-Z][A-Z-]{0,19}) ([^\s]+) HTTP\/\d\.\d\r?\n/;

/**
 * Requests Node's HTTP parser rejects (malformed, header section too large, headers not finished
 * within the header timeout) never reach koa; without this they get a bare status line and no
 * metric. The contract wants errorCode on every error, so they are answered with a problem body,
 * counted like routed requests (route "unparsed") and logged with their trace id.
 */
export function answerMalformedRequests(server: Server, options: MalformedRequestOptions = {}): void {
  const connectedAt = new WeakMap<Socket, bigint>();
  server.on("connection", (socket: Socket) => connectedAt.set(socket, process.hrtime.bigint()));
  server.on("clientError", (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || err.code === "ECONNRESET" || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const error = problemForParserError(err);
    const request = requestLineOf(err.rawPacket);
    const traceId = requestTraceId(undefined);
    const started = connectedAt.get(socket);
    options.metrics?.observeHttpRequest({
      route: UNPARSED_ROUTE,
      method: request?.method ?? "OTHER",
      status: error.status,
      durationSeconds: started === undefined ? 0 : Number(process.hrtime.bigint() - started) / 1e9,
    });
    options.metrics?.recordProblem(error.status, error.errorCode);
    options.logger?.info(
      { traceId, method: request?.method, path: request?.path, status: error.status, errorCode: error.errorCode, parserError: err.code },
      "request refused by the HTTP parser",
    );
    const body = JSON.stringify(problemBody(error, request?.path, traceId, options.typeBaseUrl));
    socket.end(
      `HTTP/1.1 ${error.status} ${error.title}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        "Connection: close\r\n\r\n" +
        body,
    );
  });
}

function problemForParserError(err: NodeJS.ErrnoException): AppError {
  if (err.code === "HPE_HEADER_OVERFLOW") return Errors.headersTooLarge();
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") return Errors.requestTimeout();
  return Errors.badRequest();
}

/**
 * Method and path of the request line, when the packet the parser failed on starts with one (it
 * does for a request sent in one piece; a timeout or a failure in a later packet leaves it unknown).
 * The path is the raw target without its query, with anything outside printable ASCII
 * percent-encoded, so the problem body never carries raw bytes.
 */
export function requestLineOf(packet: Buffer | undefined): { method: string; path: string } | undefined {
  if (!packet) return undefined;
  const match = REQUEST_LINE.exec(packet.subarray(0, INSTANCE_MAX + 64).toString("latin1"));
  if (!match) return undefined;
  let target = match[2];
  if (/^https?:\/\//i.test(target)) target = target.replace(/^https?:\/\/[^/?#]*/i, "") || "/";
  if (!target.startsWith("/")) return undefined;
  const path = target.split(/[?#]/)[0].slice(0, INSTANCE_MAX);
  const safe = path.replace(/[^\x21-\x7e]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
  return { method: match[1], path: safe };
}
