import type { Context } from "koa";
import { asBuffer } from "@exportsvc/rpc";
import { sendStreamedBody, type ChunkSource, type StreamOptions } from "../http/streamed-body";

export const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
export const CSV_CONTENT_TYPE = "text/csv; charset=utf-8";

/** One page of CSV as the export service streams it: byte chunks, cancellable. */
export interface CsvChunkStream extends AsyncIterable<{ data: Uint8Array }> {
  cancel(): void;
  on(event: "error", listener: (err: Error) => void): unknown;
}

export type CsvStreamOptions = StreamOptions;

/** A server stream's messages as a ChunkSource, `chunkOf` picking each message's bytes. */
export function chunkSource<M>(call: AsyncIterable<M> & { cancel(): void; on(event: "error", listener: (err: Error) => void): unknown }, chunkOf: (message: M) => Uint8Array): ChunkSource {
  // Errors reach us through the iterator; this keeps a late one (e.g. CANCELLED after the iterator
  // was released) from being an unhandled 'error' event that would crash the process.
  call.on("error", () => undefined);
  const messages = call[Symbol.asyncIterator]();
  return {
    next: async () => {
      const next = await messages.next();
      return next.done ? next : { done: false, value: asBuffer(chunkOf(next.value)) };
    },
    cancel: () => call.cancel(),
  };
}

/**
 * Sends one CSV page (docs/contract.md §5: byte-order mark, chunked, no Content-Length),
 * streamed from the export service: see sendStreamedBody for the held-back head, backpressure,
 * aborts and the stall timeout.
 */
export async function sendCsvStream(ctx: Context, call: CsvChunkStream, options: CsvStreamOptions): Promise<void> {
  await sendStreamedBody(
    ctx,
    chunkSource(call, (message) => message.data),
    { contentType: CSV_CONTENT_TYPE, cacheControl: "private, no-store", prefix: UTF8_BOM, what: "CSV" },
    options,
  );
}
