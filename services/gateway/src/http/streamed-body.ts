import { Readable, pipeline } from "node:stream";
import { promisify } from "node:util";
import { createGzip, gzip as gzipCallback } from "node:zlib";
import type { ServerResponse } from "node:http";
import type { Context } from "koa";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { fromServiceError } from "@exportsvc/rpc";

const gzipAsync = promisify(gzipCallback);

/** The chunks of a body an internal service streams (a gRPC server stream), cancellable. */
export interface ChunkSource {
  /** The next chunk, `done` once the call ended OK; rejects with the call's error. */
  next(): Promise<IteratorResult<Buffer>>;
  cancel(): void;
}

/** What is being sent: the response's framing around the source's bytes. */
export interface StreamedBody {
  contentType: string;
  cacheControl: string;
  /** Written before the first chunk (the CSV byte-order mark, the listing's `[`). */
  prefix: Buffer;
  /** Written after the last chunk, and only when the source ended OK (the listing's `]`). */
  suffix?: Buffer;
  /**
   * A body that ends inside the held-back head is sent whole, with Content-Length (and gzipped
   * only from this size on), as a buffered JSON response is; undefined: always streamed (CSV).
   */
  wholeGzipMinBytes?: number;
  /** Names the body in logs: "CSV", "listing". */
  what: string;
}

export interface StreamOptions {
  /** Bytes held back before the 200 is committed; a failure inside them is still a problem response. */
  headBytes: number;
  /** zlib level when the client accepts gzip. */
  gzipLevel: number;
  /** The client accepting no bytes for this long (the response stays full) aborts the response. */
  stallTimeoutMs: number;
  logger: Logger;
  metrics?: ServiceMetrics;
}

/**
 * Sends a 200 whose body an internal service streams: holds back the first `headBytes` (so an
 * early failure is an ordinary problem response, thrown as the service's AppError), then commits
 * the 200 and pipes the rest with backpressure from the socket to the gRPC flow control. A failure
 * after the commit aborts the connection: the body ends without the suffix and without the final
 * chunk of the chunked encoding, so no client takes it for a whole response. A client that goes
 * away cancels the call, and so does one that stops reading for `stallTimeoutMs` (its connection
 * is aborted), so a reader that never reads cannot keep a concurrency slot and a database connection.
 */
export async function sendStreamedBody(ctx: Context, source: ChunkSource, body: StreamedBody, options: StreamOptions): Promise<void> {
  const res = ctx.res;
  let finished = false;
  let clientLeft = false;
  const cancelUnlessFinished = () => {
    if (finished) return;
    clientLeft = true;
    source.cancel();
  };
  res.once("close", cancelUnlessFinished);

  const head: Buffer[] = [body.prefix];
  let headSize = 0;
  try {
    while (headSize < options.headBytes) {
      const next = await source.next();
      if (next.done) {
        finished = true;
        if (body.suffix) head.push(body.suffix);
        break;
      }
      head.push(next.value);
      headSize += next.value.length;
    }
  } catch (err) {
    finished = true;
    if (res.closed) {
      ctx.respond = false;
      return;
    }
    throw fromServiceError(err);
  }

  const gzip = ctx.acceptsEncodings("gzip", "identity") === "gzip";
  ctx.vary("Accept-Encoding");
  if (finished && body.wholeGzipMinBytes !== undefined) {
    // The whole body is here: an ordinary response with Content-Length.
    const whole = Buffer.concat(head);
    ctx.type = body.contentType;
    ctx.set("Cache-Control", body.cacheControl);
    if (gzip && whole.length >= body.wholeGzipMinBytes) {
      ctx.set("Content-Encoding", "gzip");
      ctx.body = await gzipAsync(whole, { level: options.gzipLevel });
    } else {
      ctx.body = whole;
    }
    return;
  }

  async function* chunks(): AsyncGenerator<Buffer> {
    yield Buffer.concat(head);
    if (finished) return;
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await source.next();
      } catch (err) {
        // The call is over (failed); closing the response must not count as the client leaving.
        finished = true;
        throw err;
      }
      if (next.done) {
        finished = true;
        if (body.suffix) yield body.suffix;
        return;
      }
      yield next.value;
    }
  }

  ctx.respond = false;
  res.statusCode = 200;
  res.setHeader("Content-Type", body.contentType);
  res.setHeader("Cache-Control", body.cacheControl);
  if (gzip) res.setHeader("Content-Encoding", "gzip");
  if (ctx.method === "HEAD") {
    // The body would be discarded: the head already proved it can be served, so stop the call.
    finished = true;
    source.cancel();
    res.end();
    return;
  }

  const stream = Readable.from(chunks(), { objectMode: false });
  let stalled = false;
  const stopWatching = watchForStall(res, options.stallTimeoutMs, () => {
    stalled = true;
    options.logger.warn(
      { traceId: ctx.state.traceId, path: ctx.path, stallTimeoutMs: options.stallTimeoutMs },
      `${body.what} client accepted no bytes for the stall timeout; connection aborted`,
    );
    res.destroy();
  });
  await new Promise<void>((resolve) => {
    const done = (err?: NodeJS.ErrnoException | null) => {
      stopWatching();
      if (!err) return resolve();
      options.metrics?.recordStreamAbort(stalled ? "stalled" : clientLeft ? "client_disconnect" : "upstream_error");
      if (!res.closed) res.destroy();
      if (!clientLeft && !stalled) {
        options.logger.warn(
          { traceId: ctx.state.traceId, path: ctx.path, err: fromServiceError(err).toFields() },
          `${body.what} stream failed after the 200 was sent; connection aborted`,
        );
      }
      resolve();
    };
    // The request's own watchers (context, slot release, cancel) and the pipeline's end-of-stream
    // watchers pass Node's default of 10 'close' listeners on this one response; they all go with it,
    // so this is not a leak, but the warning would say so on every CSV page and listing.
    res.setMaxListeners(Math.max(res.getMaxListeners(), 32));
    if (gzip) pipeline(stream, createGzip({ level: options.gzipLevel }), res, done);
    else pipeline(stream, res, done);
  });
}

/**
 * Calls `onStall` once the response has stayed full (the client read nothing, so the socket never
 * drained) for `timeoutMs`. A slow reader that drains now and then is never stalled. Returns the
 * function that stops watching.
 */
export function watchForStall(res: ServerResponse, timeoutMs: number, onStall: () => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  const disarm = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const check = () => {
    if (!res.writableNeedDrain) return disarm();
    timer ??= setTimeout(() => {
      stop();
      onStall();
    }, timeoutMs);
  };
  // Writes are the pipeline's; checking a few times per timeout costs nothing and needs no hook in it.
  const poll = setInterval(check, Math.max(50, Math.min(1_000, Math.floor(timeoutMs / 4))));
  poll.unref();
  res.on("drain", disarm);
  const stop = () => {
    clearInterval(poll);
    disarm();
    res.off("drain", disarm);
  };
  return stop;
}
