import type { Server } from "node:http";
import type { Socket } from "node:net";
import { Errors } from "@exportsvc/common";
import { PROBLEM_CONTENT_TYPE, problemBody } from "./problem";
import { requestTraceId } from "./trace";

/**
 * Requests Node's HTTP parser rejects never reach koa; without this they get a bare status line.
 * The contract wants errorCode on every error, so they are answered with a problem body too.
 */
export function answerMalformedRequests(server: Server, typeBaseUrl?: string): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || err.code === "ECONNRESET") {
      socket.destroy();
      return;
    }
    const error = err.code === "HPE_HEADER_OVERFLOW" ? Errors.headersTooLarge() : Errors.badRequest();
    const body = JSON.stringify(problemBody(error, "/", requestTraceId(undefined), typeBaseUrl));
    socket.end(
      `HTTP/1.1 ${error.status} ${error.title}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        "Connection: close\r\n\r\n" +
        body,
    );
  });
}
