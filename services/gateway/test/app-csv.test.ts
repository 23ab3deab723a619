import { gunzipSync } from "node:zlib";
import { request } from "undici";
import { Errors } from "@exportsvc/common";
import { auth, csvBytes, eventually, ORGANIZATION_ID, startHarness, writeChunk, type Harness } from "./support/harness";

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const KiB = 1024;

let h: Harness;
/** Bytes the endless producer has written so far. */
let endlessWritten = 0;

/** Streams `total` bytes in `chunk`-sized pieces, then fails with `error` if given. */
const streamThen = (total: Buffer, chunk: number, error?: () => Error) => async (_req: unknown, call: any) => {
  for (let offset = 0; offset < total.length; offset += chunk) await writeChunk(call, total.subarray(offset, offset + chunk));
  if (error) throw error();
};

/**
 * The byte count a producer settles at: it has not moved for 300 ms. A producer that never stops
 * (no backpressure) fails here after 20 s, or passes any bound put on its plateau.
 */
async function writtenPlateau(written: () => number): Promise<number> {
  const deadline = Date.now() + 20_000;
  for (let last = -1; ; ) {
    const now = written();
    if (now === last) return now;
    if (Date.now() > deadline) throw new Error(`the producer never stopped: ${now} bytes written`);
    last = now;
    await new Promise((r) => setTimeout(r, 300));
  }
}

const SMALL = Buffer.from("id,name,_cursor\n1,\"a, b\",c1\n2,é,c2\n");
const LARGE = csvBytes(3 * 1024 * KiB + 17);

beforeAll(async () => {
  h = await startHarness();
  h.exportBehaviours.set("small", streamThen(SMALL, 10));
  h.exportBehaviours.set("empty", async () => undefined);
  h.exportBehaviours.set("large", streamThen(LARGE, 32 * KiB));
  h.exportBehaviours.set("fail-at-10k", streamThen(csvBytes(10 * KiB), 4 * KiB, () => Errors.databaseUnavailable()));
  h.exportBehaviours.set("fail-at-200k", streamThen(csvBytes(200 * KiB), 16 * KiB, () => Errors.datasetNotExportable("row 1234 cannot be rendered")));
  h.exportBehaviours.set("endless", async (_req, call) => {
    const chunk = csvBytes(32 * KiB);
    while (!call.cancelled) {
      await writeChunk(call, chunk);
      endlessWritten += chunk.length;
    }
  });
});
afterAll(() => h.close());

describe("GET /v1/datasets/:datasetKey/csv", () => {
  it("streams the page as chunked UTF-8 CSV with a BOM, and releases the admission", async () => {
    const res = await request(`${h.url}/v1/datasets/small/csv`, { headers: auth });
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(res.headers["content-length"]).toBeUndefined();
    expect(res.headers["transfer-encoding"]).toBe("chunked");
    expect(body).toEqual(Buffer.concat([BOM, SMALL]));
    await eventually(() => h.rateLimiter.inFlight === 0);
  });

  it("sends the BOM alone for an empty stream", async () => {
    const res = await request(`${h.url}/v1/datasets/empty/csv`, { headers: auth });
    expect(res.statusCode).toBe(200);
    expect(Buffer.from(await res.body.arrayBuffer())).toEqual(BOM);
  });

  it("passes the parsed parameters and the key's organization to the export service", async () => {
    const res = await request(
      `${h.url}/v1/datasets/small/csv?modifiedSince=2024-05-01%2012:30:00.123456%2B00&after=0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b&afterRowIndex=2&limit=10&from=2024-01-01T00:00:00Z&organizationId=evil`,
      { headers: auth },
    );
    await res.body.dump();
    expect(h.exportRequests.at(-1)).toMatchObject({
      organizationId: ORGANIZATION_ID,
      datasetKey: "small",
      modifiedSinceMicros: BigInt(Date.parse("2024-05-01T12:30:00.123Z")) * 1000n + 456n,
      after: "0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b",
      afterRowIndex: 2n,
      limit: 10,
      fromMicros: BigInt(Date.parse("2024-01-01T00:00:00Z")) * 1000n,
    });
    expect(h.exportRequests.at(-1)?.cursor).toBeUndefined();
    expect(h.exportRequests.at(-1)?.toMicros).toBeUndefined();
  });

  it("delivers a multi-megabyte page byte for byte", async () => {
    const res = await request(`${h.url}/v1/datasets/large/csv`, { headers: auth });
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(body.length).toBe(LARGE.length + 3);
    expect(body.equals(Buffer.concat([BOM, LARGE]))).toBe(true);
  });

  it("a failure inside the first 64 KiB is an ordinary problem response", async () => {
    const res = await request(`${h.url}/v1/datasets/fail-at-10k/csv`, { headers: auth });
    expect(res.statusCode).toBe(503);
    expect(res.headers["content-type"]).toBe("application/problem+json");
    const body = (await res.body.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ errorCode: "DATABASE_UNAVAILABLE", status: 503 });
    await eventually(() => h.rateLimiter.inFlight === 0);
  });

  it("a failure after the 200 aborts the connection, with no marker in the CSV", async () => {
    const res = await request(`${h.url}/v1/datasets/fail-at-200k/csv`, { headers: auth });
    expect(res.statusCode).toBe(200);
    const received: Buffer[] = [];
    const reading = (async () => {
      for await (const chunk of res.body) received.push(chunk as Buffer);
    })();
    await expect(reading).rejects.toThrow();
    const text = Buffer.concat(received).toString("utf8");
    expect(text.length).toBeGreaterThanOrEqual(64 * KiB);
    expect(text).not.toMatch(/errorCode|problem|cannot be rendered/);
    await eventually(() => h.rateLimiter.inFlight === 0);
    expect(h.logs.join("")).toContain("connection aborted");
  });

  it("gzips the CSV when the client accepts it", async () => {
    const res = await request(`${h.url}/v1/datasets/large/csv`, { headers: { ...auth, "accept-encoding": "gzip" } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-encoding"]).toBe("gzip");
    expect(res.headers.vary).toContain("Accept-Encoding");
    const compressed = Buffer.from(await res.body.arrayBuffer());
    expect(compressed.length).toBeLessThan(LARGE.length / 4);
    expect(gunzipSync(compressed).equals(Buffer.concat([BOM, LARGE]))).toBe(true);
  });

  it("does not gzip when the client does not ask for it", async () => {
    const res = await request(`${h.url}/v1/datasets/small/csv`, { headers: { ...auth, "accept-encoding": "identity" } });
    expect(res.headers["content-encoding"]).toBeUndefined();
    expect(Buffer.from(await res.body.arrayBuffer())).toEqual(Buffer.concat([BOM, SMALL]));
  });

  it("respects backpressure: a client that stops reading stops the producer", async () => {
    endlessWritten = 0;
    const cancelledBefore = h.cancelledExports;
    const res = await request(`${h.url}/v1/datasets/endless/csv`, { headers: auth, highWaterMark: 16 * KiB });
    expect(res.statusCode).toBe(200);
    // Read nothing more: only socket, HTTP/2 window and stream buffers may fill, then the producer
    // stops. Wait for it to stop (however long a loaded machine takes), never for a fixed time.
    const plateau = await writtenPlateau(() => endlessWritten);
    expect(plateau).toBeLessThan(32 * 1024 * KiB);
    res.body.destroy();
    await eventually(() => h.cancelledExports > cancelledBefore);
    await eventually(() => h.rateLimiter.inFlight === 0);
  });

  it("a client that disconnects mid-stream cancels the export call and frees its slot", async () => {
    const cancelledBefore = h.cancelledExports;
    const res = await request(`${h.url}/v1/datasets/endless/csv`, { headers: auth });
    let read = 0;
    for await (const chunk of res.body) {
      read += (chunk as Buffer).length;
      if (read > 256 * KiB) break;
    }
    res.body.destroy();
    await eventually(() => h.cancelledExports > cancelledBefore);
    await eventually(() => h.rateLimiter.inFlight === 0);
    expect(h.rateLimiter.admitted).toBe(h.rateLimiter.released);
  });

  it("HEAD answers the CSV headers without streaming the page, and stops the export", async () => {
    const cancelledBefore = h.cancelledExports;
    const res = await request(`${h.url}/v1/datasets/endless/csv`, { method: "HEAD", headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(await res.body.text()).toBe("");
    await eventually(() => h.cancelledExports > cancelledBefore);
    await eventually(() => h.rateLimiter.inFlight === 0);
    const missing = await request(`${h.url}/v1/datasets/missing/csv`, { method: "HEAD", headers: auth });
    expect(missing.statusCode).toBe(404);
    await missing.body.dump();
  });

  it("a client that disconnects before the 200 also cancels the call and frees its slot", async () => {
    const slowStart = "slow-start";
    let started = false;
    h.exportBehaviours.set(slowStart, async (_req, call) => {
      started = true;
      await writeChunk(call, csvBytes(1 * KiB));
      await new Promise<void>((resolve) => call.once("cancelled", () => resolve()));
    });
    const cancelledBefore = h.cancelledExports;
    const controller = new AbortController();
    const pending = request(`${h.url}/v1/datasets/${slowStart}/csv`, { headers: auth, signal: controller.signal });
    await eventually(() => started);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await eventually(() => h.cancelledExports > cancelledBefore);
    await eventually(() => h.rateLimiter.inFlight === 0);
  });
});
