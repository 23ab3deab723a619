import type { Context } from "koa";
import { ifNoneMatchHits } from "@exportsvc/common";
import type { ListDatasetsResponse, ListingHead } from "@exportsvc/proto";
import { asBuffer, fromServiceError, grpc } from "@exportsvc/rpc";
import { sendStreamedBody, type ChunkSource, type StreamOptions } from "./streamed-body";

/** ListDatasets' server stream as the gateway reads it (a fake in tests). */
export interface ListingStream extends AsyncIterable<ListDatasetsResponse> {
  cancel(): void;
  on(event: "error", listener: (err: Error) => void): unknown;
}

export interface ListingResponseOptions extends StreamOptions {
  /** The request's If-None-Match header ("" when absent). */
  ifNoneMatch: string;
  /** CATALOG_DEADLINE_MS: the catalog must have built the listing (sent its head) within this. */
  headDeadlineMs: number;
  /** Sees the head the catalog sent (the gateway remembers settled versions from it). */
  onHead?: (head: ListingHead) => void;
}

const OPEN = Buffer.from("[");
const CLOSE = Buffer.from("]");
/** Bodies below this size gain nothing from gzip (framing overhead beats the saving). */
const GZIP_MIN_BYTES = 1024;

/**
 * Answers GET /v1/datasets from the catalog's stream (docs/catalog.md, "Streaming the listing"):
 * the head gives the ETag (so headers go out before any entry) and decides the 304; the entries
 * arrive as rendered JSON text and are piped between `[` and a `]` written only once the stream
 * ended OK, so a listing that fails half-way is an aborted response, never a shorter array.
 * The deadline covers the head (the catalog's whole build); the body is then bounded by the stall
 * timeout, like a CSV page, so a 100k-dataset listing to a slow client is not cut off.
 */
export async function sendListing(ctx: Context, call: ListingStream, options: ListingResponseOptions): Promise<void> {
  // Errors reach us through the iterator; this keeps a late one from crashing the process.
  call.on("error", () => undefined);
  const messages = call[Symbol.asyncIterator]();
  const head = await readHead(messages, call, options.headDeadlineMs);
  options.onHead?.(head);
  setListingHeaders(ctx, head.etag);
  if (head.notModified || (options.ifNoneMatch && head.etag && ifNoneMatchHits(options.ifNoneMatch, head.etag))) {
    call.cancel();
    ctx.status = 304;
    return;
  }
  const source: ChunkSource = {
    next: async () => {
      const next = await messages.next();
      if (next.done) return next;
      if (next.value.part.case !== "entries") throw new Error(`listing stream: unexpected ${next.value.part.case ?? "empty"} message`);
      return { done: false, value: asBuffer(next.value.part.value) };
    },
    cancel: () => call.cancel(),
  };
  await sendStreamedBody(
    ctx,
    source,
    { contentType: "application/json; charset=utf-8", cacheControl: "private, no-cache", prefix: OPEN, suffix: CLOSE, wholeGzipMinBytes: GZIP_MIN_BYTES, what: "listing" },
    options,
  );
}

/** A listing's response headers, a 304's included. */
function setListingHeaders(ctx: Context, etag: string): void {
  ctx.set("ETag", etag);
  ctx.set("Cache-Control", "private, no-cache");
  ctx.vary("Accept-Encoding");
}

/** Answers the listing with 304 Not Modified, as the catalog's not_modified is answered. */
export function sendListingNotModified(ctx: Context, etag: string): void {
  setListingHeaders(ctx, etag);
  ctx.status = 304;
}

/** The stream's first message, which must be the head, within the deadline (else the call is cancelled). */
async function readHead(messages: AsyncIterator<ListDatasetsResponse>, call: ListingStream, deadlineMs: number): Promise<ListingHead> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      call.cancel();
      // What a unary call past its deadline gave: 503, "an internal service did not answer".
      reject(fromServiceError({ code: grpc.status.DEADLINE_EXCEEDED }));
    }, deadlineMs);
  });
  try {
    const first = await Promise.race([messages.next(), deadline]);
    if (first.done || first.value.part.case !== "head") throw new Error("listing stream: no head");
    return first.value.part.value;
  } catch (err) {
    call.cancel();
    throw fromServiceError(err);
  } finally {
    clearTimeout(timer);
  }
}
