import { once } from "node:events";
import type * as grpc from "@grpc/grpc-js";

/**
 * The write side of a server stream with flow control, and the lifetime of its consumer: one owner
 * of backpressure and cancellation (a cancel, a passed deadline or a disconnect all end the call)
 * for every server-streaming handler (the export's pages, the catalog's listing).
 */
export interface StreamSink<T> {
  /** False: the call's buffer is full; wait for drained() (or gone) before writing more. */
  write(item: T): boolean;
  drained(): Promise<void>;
  /** Resolves when the consumer is gone (cancel, deadline, disconnect). */
  readonly gone: Promise<void>;
  isGone(): boolean;
}

/** A StreamSink over a server stream; `message` wraps each item into the stream's response message. */
export function grpcSink<Req, Res, T = Buffer>(call: grpc.ServerWritableStream<Req, Res>, message: (item: T) => Res): StreamSink<T> {
  let gone = false;
  const goneSignal = new Promise<void>((resolve) => {
    const mark = () => {
      gone = true;
      resolve();
    };
    if (call.cancelled) mark();
    call.once("cancelled", mark);
    call.once("close", mark);
    call.once("error", mark);
  });
  return {
    write: (item) => call.write(message(item)),
    drained: async () => {
      await once(call, "drain");
    },
    gone: goneSignal,
    isGone: () => gone || call.cancelled,
  };
}

/** Writes one item, waiting for the call's window when it is full; returns at once when the consumer is gone. */
export async function sendOrGone<T>(sink: StreamSink<T>, item: T): Promise<void> {
  if (!sink.write(item)) await Promise.race([sink.drained(), sink.gone]);
}
