/**
 * A cut CSV page must never pass for a complete one, and a client that stops reading must not keep
 * its slot and its export: HTTP/1.0 (no chunking, no length) is refused, and a response the client
 * accepts nothing of for STREAM_STALL_TIMEOUT_MS is aborted.
 */
import { connect } from "node:net";
import { request } from "undici";
import { GatewayMetrics } from "../src/metrics";
import { auth, csvBytes, eventually, GOOD_KEY, startHarness, writeChunk, type Harness } from "./support/harness";

const KiB = 1024;
const STALL_MS = 1000;
let h: Harness;
const metrics = new GatewayMetrics({ defaultMetrics: false });

beforeAll(async () => {
  h = await startHarness({ streamStallTimeoutMs: STALL_MS, metrics });
  h.exportBehaviours.set("endless", async (_req, call) => {
    const chunk = csvBytes(32 * KiB);
    while (!call.cancelled) await writeChunk(call, chunk);
  });
  h.exportBehaviours.set("small", async (_req, call) => writeChunk(call, Buffer.from("id,_cursor\n1,c\n")));
});
afterAll(() => h.close());

/** Sends a raw request and collects the whole answer until the server closes the connection. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    const chunks: Buffer[] = [];
    socket.on("data", (c) => chunks.push(c));
    socket.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    socket.on("error", reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer")));
  });
}

const port = () => Number(new URL(h.url).port);

describe("HTTP/1.0 on the CSV endpoint", () => {
  it("is refused with 400 HTTP_VERSION_NOT_SUPPORTED before any key check or export (curl -0)", async () => {
    const exportsBefore = h.exportRequests.length;
    const admittedBefore = h.rateLimiter.admitted;
    const answer = await rawRequest(port(), `GET /v1/datasets/endless/csv HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${GOOD_KEY}\r\n\r\n`);
    const [head, body] = answer.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head.toLowerCase()).toContain("content-type: application/problem+json");
    expect(head.toLowerCase()).toMatch(/content-length: \d+/);
    expect(JSON.parse(body)).toMatchObject({ status: 400, errorCode: "HTTP_VERSION_NOT_SUPPORTED", instance: "/v1/datasets/endless/csv" });
    expect(JSON.parse(body).detail).toMatch(/HTTP\/1\.1/);
    expect(h.exportRequests.length).toBe(exportsBefore);
    expect(h.rateLimiter.admitted).toBe(admittedBefore);
  });

  it("is refused without a key as well, and for HEAD", async () => {
    const noKey = await rawRequest(port(), "GET /v1/datasets/small/csv HTTP/1.0\r\n\r\n");
    expect(noKey).toMatch(/^HTTP\/1\.1 400 /);
    expect(noKey).toContain('"errorCode":"HTTP_VERSION_NOT_SUPPORTED"');
    const head = await rawRequest(port(), `HEAD /v1/datasets/small/csv HTTP/1.0\r\nAuthorization: Bearer ${GOOD_KEY}\r\n\r\n`);
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("is refused when a proxy reports its client spoke HTTP/1.0 (X-Client-Http-Version)", async () => {
    const res = await request(`${h.url}/v1/datasets/small/csv`, { headers: { ...auth, "x-client-http-version": "HTTP/1.0" } });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toMatchObject({ errorCode: "HTTP_VERSION_NOT_SUPPORTED" });
    const ok = await request(`${h.url}/v1/datasets/small/csv`, { headers: { ...auth, "x-client-http-version": "HTTP/2.0" } });
    expect(ok.statusCode).toBe(200);
    await ok.body.dump();
  });

  it("HTTP/1.1 gets the page chunked, so a cut page lacks its final chunk", async () => {
    const answer = await rawRequest(port(), `GET /v1/datasets/small/csv HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${GOOD_KEY}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.toLowerCase()).toContain("transfer-encoding: chunked");
    expect(answer.endsWith("0\r\n\r\n")).toBe(true);
  });

  it("the listing (sent with a Content-Length) stays available over HTTP/1.0", async () => {
    const answer = await rawRequest(port(), `GET /v1/datasets HTTP/1.0\r\nAuthorization: Bearer ${GOOD_KEY}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.toLowerCase()).toMatch(/content-length: \d+/);
  });
});

describe("a client that stops reading", () => {
  it("has its connection aborted after the stall timeout; the export is cancelled and the slot freed", async () => {
    const cancelledBefore = h.cancelledExports;
    const res = await request(`${h.url}/v1/datasets/endless/csv`, { headers: auth, highWaterMark: 16 * KiB });
    expect(res.statusCode).toBe(200);
    // Read nothing at all; the body must end in an error (aborted), never as a complete page.
    const outcome = new Promise<string>((resolve) => {
      res.body.on("error", () => resolve("aborted"));
      res.body.on("end", () => resolve("ended"));
    });
    res.body.pause();
    await eventually(() => h.cancelledExports > cancelledBefore, 20_000);
    await eventually(() => h.rateLimiter.inFlight === 0, 5_000);
    res.body.resume();
    expect(await outcome).toBe("aborted");
    expect(h.logs.join("")).toContain("accepted no bytes for the stall timeout");
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/export_stream_aborts_total\{[^}]*reason="stalled"[^}]*\} 1/);
  });

  it("a client that keeps reading, however slowly, is not aborted", async () => {
    const total = 2 * 1024 * KiB;
    h.exportBehaviours.set("two-mib", async (_req, call) => {
      for (let sent = 0; sent < total; sent += 32 * KiB) await writeChunk(call, csvBytes(32 * KiB));
    });
    const res = await request(`${h.url}/v1/datasets/two-mib/csv`, { headers: auth, highWaterMark: 16 * KiB });
    let received = 0;
    let paused = 0;
    for await (const chunk of res.body) {
      received += (chunk as Buffer).length;
      // Paced reading (20 ms per 16 KiB): about 2.5 s for the page, more than the stall timeout, never a pause near it.
      const pause = 20 * Math.ceil((chunk as Buffer).length / (16 * KiB));
      paused += pause;
      await new Promise((r) => setTimeout(r, pause));
    }
    expect(received).toBe(total + 3);
    // The pauses alone outlast the stall timeout (a sum of our own delays, not a clock reading).
    expect(paused).toBeGreaterThan(STALL_MS);
  });
});
