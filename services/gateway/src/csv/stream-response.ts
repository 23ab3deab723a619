import { Readable, pipeline } from "node:stream";
import { createGzip } from "node:zlib";
import type { Context } from "koa";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { fromServiceError } from "@exportsvc/rpc";

export const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
export const CSV_CONTENT_TYPE = "text/csv; charset=utf-8";

/** One page of CSV as the export service streams it: byte chunks, cancellable. */
export interface CsvChunkStream extends AsyncIterable<{ data: Uint8Array }> {
  cancel(): void;
  on(event: "error", listener: (err: Error) => void): unknown;
}

export interface CsvStreamOptions {
  /** Bytes held back before the 200 is committed; a failure inside them is still a problem response. */
  headBytes: number;
  /** zlib level when the client accepts gzip. */
  gzipLevel: number;
  logger: Logger;
  metrics?: ServiceMetrics;
}

const asBuffer = (data: Uint8Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength);

/**
 * Sends one CSV page: holds back the first `headBytes` (so an early failure is an ordinary problem
 * response, thrown as the service's AppError), then commits the 200 and pipes the rest with
 * backpressure from the socket to the gRPC flow control. A failure after the commit aborts the
 * connection (no marker inside the CSV); a client that goes away cancels the gRPC call.
 */
export async function sendCsvStream(ctx: Context, call: CsvChunkStream, options: CsvStreamOptions): Promise<void> {
  const res = ctx.res;
  let finished = false;
  let clientLeft = false;
  const cancelUnlessFinished = () => {
    if (finished) return;
    clientLeft = true;
    call.cancel();
  };
  res.once("close", cancelUnlessFinished);
  // Errors reach us through the iterator; this keeps a late one (e.g. CANCELLED after the iterator
  // was released) from being an unhandled 'error' event that would crash the process.
  call.on("error", () => undefined);

  const chunks = call[Symbol.asyncIterator]();
  const head: Buffer[] = [UTF8_BOM];
  let headSize = 0;
  try {
    while (headSize < options.headBytes) {
      const next = await chunks.next();
      if (next.done) {
        finished = true;
        break;
      }
      const chunk = asBuffer(next.value.data);
      head.push(chunk);
      headSize += chunk.length;
    }
  } catch (err) {
    finished = true;
    if (res.closed) {
      ctx.respond = false;
      return;
    }
    throw fromServiceError(err);
  }

  async function* body(): AsyncGenerator<Buffer> {
    yield Buffer.concat(head);
    if (finished) return;
    for (;;) {
      let next: IteratorResult<{ data: Uint8Array }>;
      try {
        next = await chunks.next();
      } catch (err) {
        // The call is over (failed); closing the response must not count as the client leaving.
        finished = true;
        throw err;
      }
      if (next.done) {
        finished = true;
        return;
      }
      yield asBuffer(next.value.data);
    }
  }

  const gzip = ctx.acceptsEncodings("gzip", "identity") === "gzip";
  ctx.respond = false;
  res.statusCode = 200;
  res.setHeader("Content-Type", CSV_CONTENT_TYPE);
  res.setHeader("Cache-Control", "private, no-store");
  res.setHeader("Vary", "Accept-Encoding");
  if (gzip) res.setHeader("Content-Encoding", "gzip");
  if (ctx.method === "HEAD") {
    // The page would be discarded: the head already proved it can be served, so stop the export.
    finished = true;
    call.cancel();
    res.end();
    return;
  }

  const source = Readable.from(body(), { objectMode: false });
  await new Promise<void>((resolve) => {
    const done = (err?: NodeJS.ErrnoException | null) => {
      if (!err) return resolve();
      options.metrics?.recordStreamAbort(clientLeft ? "client_disconnect" : "upstream_error");
      if (!res.closed) res.destroy();
      if (!clientLeft) {
        options.logger.warn(
          { traceId: ctx.state.traceId, path: ctx.path, err: fromServiceError(err).toFields() },
          "CSV stream failed after the 200 was sent; connection aborted",
        );
      }
      resolve();
    };
    if (gzip) pipeline(source, createGzip({ level: options.gzipLevel }), res, done);
    else pipeline(source, res, done);
  });
}
