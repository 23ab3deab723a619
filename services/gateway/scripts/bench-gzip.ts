/**
 * Measures the cost of gzipping CSV pages at several zlib levels (throughput on one core and
 * compression ratio), to choose GZIP_LEVEL. Data: submission-shaped rows (uuids, timestamps,
 * codes, short texts, numbers, a cursor), the typical export payload.
 *   npx tsx services/gateway/scripts/bench-gzip.ts [megabytes]
 */
import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";

const megabytes = Number(process.argv[2] ?? 64);
const words = ["pass", "fail", "Line 3", "checked by shift lead", "temperature ok", "Completed", "InProgress", "Site A / Hall 2"];
const rows: string[] = [];
let size = 0;
for (let i = 0; size < megabytes * 1024 * 1024; i++) {
  const ts = new Date(Date.UTC(2025, 0, 1) + i * 997).toISOString().replace("T", " ").replace("Z", "+00");
  const row = [
    randomUUID(), `AUD-${i}`, randomUUID(), "Plant North", `${randomUUID()}.${randomUUID()}`, words[i % 6 > 4 ? 5 : 6], i % 7 === 0 ? "t" : "f",
    ts, ts.slice(0, 19), ts, ts.slice(0, 19), ts, ts.slice(0, 19), words[i % words.length], String((i * 37) % 1000 / 10),
    words[(i * 3) % words.length], i % 2 ? "t" : "f", `"${words[i % 3]}, ${words[(i + 1) % 3]}"`, `v1.${Buffer.from(randomUUID()).toString("base64")}`,
  ].join(",");
  rows.push(row);
  size += row.length + 1;
}
const csv = Buffer.from(rows.join("\n") + "\n");
// Gzip a page-sized piece at a time, as the gateway does per response.
const PAGE = 4 * 1024 * 1024;
for (const level of [1, 3, 6]) {
  let out = 0;
  const started = process.hrtime.bigint();
  for (let offset = 0; offset < csv.length; offset += PAGE) out += gzipSync(csv.subarray(offset, offset + PAGE), { level }).length;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  process.stdout.write(
    `level ${level}: ${(csv.length / 1048576 / seconds).toFixed(0)} MB/s per core, ratio ${(csv.length / out).toFixed(2)}x (${(out / 1048576).toFixed(1)} of ${(csv.length / 1048576).toFixed(1)} MB)\n`,
  );
}
