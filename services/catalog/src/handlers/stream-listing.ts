import type * as grpc from "@grpc/grpc-js";
import { grpcSink, sendOrGone } from "@exportsvc/rpc";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListDatasetsRequest, ListDatasetsResponseSchema } from "@exportsvc/proto";
import type { ListDatasetsResult } from "./list-datasets";

type ListingMessage = MessageInitShape<typeof ListDatasetsResponseSchema>;
export type ListingCall = grpc.ServerWritableStream<ListDatasetsRequest, ListingMessage>;

/**
 * Sends a listing down ListDatasets' stream: the head, then the rendered entry pieces
 * (docs/catalog.md, "Streaming the listing"). Waits for the HTTP/2 window when the gateway (and
 * its client) read slower than the pieces are written; stops when the call is cancelled.
 */
export async function streamListing(call: ListingCall, listing: ListDatasetsResult): Promise<void> {
  const sink = grpcSink(call, (message: ListingMessage) => message);
  await sendOrGone(sink, {
    part: {
      case: "head",
      value: { etag: listing.etag, notModified: listing.notModified ?? false, ...(listing.settledVersion !== undefined ? { settledVersion: listing.settledVersion } : {}) },
    },
  });
  for (const piece of listing.pieces) {
    if (sink.isGone()) return;
    await sendOrGone(sink, { part: { case: "entries", value: piece } });
  }
}
