/**
 * End-to-end cost of the gateway's CSV path (gRPC chunks in, HTTP out) with and without gzip:
 * an in-process gateway in front of a fake export service that streams N MB of CSV as fast as
 * flow control allows.   npx tsx services/gateway/scripts/bench-stream.ts [megabytes]
 */
import { randomUUID } from "node:crypto";
import { request } from "undici";
import { startHarness, writeChunk, auth } from "../test/support/harness";

async function main() {
  const megabytes = Number(process.argv[2] ?? 200);
  const h = await startHarness();
  // Rows with random uuids compress like real exports (a repeated line would compress ~150x).
  const rows: string[] = [];
  for (let i = 0; rows.length < 40_000; i++) {
    const ts = new Date(Date.UTC(2025, 0, 1) + i * 997).toISOString().replace("T", " ").replace("Z", "+00");
    rows.push([randomUUID(), `AUD-${i}`, randomUUID(), "Plant North", ts, ts.slice(0, 19), "Completed", String(i % 1000), `v1.${Buffer.from(randomUUID()).toString("base64")}`].join(","));
  }
  const sample = Buffer.from(rows.join("\n") + "\n");
  const chunk = sample.subarray(0, 64 * 1024);
  const pieces = Array.from({ length: Math.floor(sample.length / chunk.length) }, (_, i) => sample.subarray(i * chunk.length, (i + 1) * chunk.length));
  const chunks = Math.ceil((megabytes * 1024 * 1024) / chunk.length);
  h.exportBehaviours.set("bench", async (_req, call) => {
    for (let i = 0; i < chunks; i++) await writeChunk(call, pieces[i % pieces.length]);
  });
  for (const encoding of ["identity", "gzip", "identity", "gzip"]) {
    const started = process.hrtime.bigint();
    const res = await request(`${h.url}/v1/datasets/bench/csv`, { headers: { ...auth, "accept-encoding": encoding } });
    let bytes = 0;
    for await (const part of res.body) bytes += (part as Buffer).length;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const mb = (chunks * chunk.length) / 1048576;
    process.stdout.write(`${encoding}: ${mb.toFixed(0)} MB CSV in ${seconds.toFixed(2)} s = ${(mb / seconds).toFixed(0)} MB/s (${(bytes / 1048576).toFixed(1)} MB on the wire)\n`);
  }
  await h.close();
}
void main();
