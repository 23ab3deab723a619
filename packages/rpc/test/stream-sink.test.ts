import { EventEmitter } from "node:events";
import type * as grpc from "@grpc/grpc-js";
import { grpcSink, sendOrGone } from "../src/stream-sink";

/** A server stream's surface the sink uses: write with a window, and the call's events. */
class FakeCall extends EventEmitter {
  cancelled = false;
  written: unknown[] = [];
  windowOpen = true;
  write(message: unknown): boolean {
    this.written.push(message);
    return this.windowOpen;
  }
}
const asCall = (call: FakeCall) => call as unknown as grpc.ServerWritableStream<unknown, { data: Buffer }>;

describe("grpcSink", () => {
  it("wraps each item into a message and waits for drain when the window is full", async () => {
    const call = new FakeCall();
    const sink = grpcSink(asCall(call), (data: Buffer) => ({ data }));
    call.windowOpen = false;
    let sent = false;
    const sending = sendOrGone(sink, Buffer.from("a")).then(() => (sent = true));
    await new Promise((r) => setImmediate(r));
    expect(sent).toBe(false);
    call.emit("drain");
    await sending;
    expect(call.written).toEqual([{ data: Buffer.from("a") }]);
  });

  it("is gone on cancel (a deadline or a client's cancel), and a blocked send returns", async () => {
    const call = new FakeCall();
    const sink = grpcSink(asCall(call), (data: Buffer) => ({ data }));
    call.windowOpen = false;
    const sending = sendOrGone(sink, Buffer.from("a"));
    expect(sink.isGone()).toBe(false);
    call.emit("cancelled");
    await sending;
    await sink.gone;
    expect(sink.isGone()).toBe(true);
  });

  it("is gone at once for a call already cancelled, and on close or error", async () => {
    const cancelled = new FakeCall();
    cancelled.cancelled = true;
    expect(grpcSink(asCall(cancelled), (data: Buffer) => ({ data })).isGone()).toBe(true);
    for (const event of ["close", "error"]) {
      const call = new FakeCall();
      const sink = grpcSink(asCall(call), (data: Buffer) => ({ data }));
      call.emit(event, new Error("x"));
      await sink.gone;
      expect(sink.isGone()).toBe(true);
    }
  });
});
