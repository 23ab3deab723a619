import http from "node:http";
import type { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import type { Pool } from "pg";
import { to as copyTo } from "pg-copy-streams";
import { buildPageQuery, COUNT_SITES_SQL, CursorCodec, PAGE_SESSION_SETTINGS_SQL, PG_EPOCH_OFFSET_MICROS, siteNameLookup, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { commandCompleted } from "@exportsvc/db";
import { ExportService } from "@exportsvc/proto";
import { asBuffer, createClient, fromServiceError } from "@exportsvc/rpc";
import { median, msSince } from "./helpers";

export interface Measurement {
  name: string;
  rows: number;
  bytes: number;
  pages: number;
  seconds: number;
  /** A page's times (medians over the pages), where the path pages itself. */
  page?: PageTimes;
}

/** Milliseconds from asking for a page to its first byte and to its last (medians over a walk's pages). */
export interface PageTimes {
  firstByteMs: number;
  lastByteMs: number;
}

/**
 * Times each page of a walk: `ask` when the page is asked for, `chunk` on every chunk, `ended`
 * when its last byte is in; `times` gives the medians. Where a page's time goes: the part before its
 * first byte is the path's fixed work (requests, statements, process hops, one at a time), the rest
 * its bytes streaming.
 */
export class PageClock {
  private asked = 0n;
  private first: number | undefined;
  private readonly firstByte: number[] = [];
  private readonly lastByte: number[] = [];
  ask(): void {
    this.asked = process.hrtime.bigint();
    this.first = undefined;
  }
  chunk(): void {
    this.first ??= msSince(this.asked);
  }
  ended(): void {
    this.firstByte.push(this.first ?? msSince(this.asked));
    this.lastByte.push(msSince(this.asked));
  }
  times(): PageTimes | undefined {
    return this.lastByte.length ? { firstByteMs: median(this.firstByte), lastByteMs: median(this.lastByte) } : undefined;
  }
}

/** "<first byte> / <last byte> ms" of a path's page, medians over its rounds' medians; "n/a" where none was timed. */
export function pageTimesText(measurements: readonly Measurement[]): string {
  const timed = measurements.flatMap((m) => (m.page ? [m.page] : []));
  if (!timed.length) return "n/a";
  return `${median(timed.map((t) => t.firstByteMs)).toFixed(1)} / ${median(timed.map((t) => t.lastByteMs)).toFixed(1)} ms`;
}

/** Keeps the last bytes of a stream: enough to read the last row's `_cursor` (the last field). */
class Tail {
  private buf = Buffer.alloc(0);
  push(chunk: Buffer | Uint8Array) {
    const b = asBuffer(chunk);
    this.buf = b.length >= 512 ? Buffer.from(b.subarray(b.length - 512)) : Buffer.concat([this.buf, b]).subarray(-512);
  }
  /** The last field of the last line (cursors never contain commas or quotes). */
  lastField(): string {
    const text = this.buf.toString("latin1").replace(/\n$/, "");
    const lastLine = text.slice(text.lastIndexOf("\n") + 1);
    return lastLine.slice(lastLine.lastIndexOf(",") + 1);
  }
}

const countLines = (chunk: Uint8Array) => {
  let n = 0;
  for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n++;
  return n;
};

/**
 * (a) The speed limit: the same page query as the service, `COPY (...) TO STDOUT (FORMAT csv)`
 * directly from PostgreSQL over one connection, bytes discarded, paged by the last row's cursor.
 */
export async function measureRawCopy(
  name: string,
  pool: Pool,
  dataset: PageDataset,
  organizationId: string,
  codec: CursorCodec,
  limit: number,
  positionOf: (cursor: string) => CursorPosition,
  /** The page's SELECT (default: the CSV page query of `dataset`); e.g. buildDeletionsQuery for the deletion feed. */
  pageQuery?: (after: CursorPosition | undefined) => string,
): Promise<Measurement> {
  // Site names read as the export service reads them for this organization (siteNameLookup).
  const siteNames = dataset.kind === "submission" ? siteNameLookup((await pool.query<{ sites: number }>({ ...COUNT_SITES_SQL, values: [organizationId] })).rows[0].sites, limit) : undefined;
  pageQuery ??= (after) => buildPageQuery(dataset, { organizationId, limit, after, siteNames }, codec);
  const client = await pool.connect();
  await client.query(PAGE_SESSION_SETTINGS_SQL); // as the export service's sessions
  const started = process.hrtime.bigint();
  const clock = new PageClock();
  let rows = 0;
  let bytes = 0;
  let pages = 0;
  let after: CursorPosition | undefined;
  try {
    for (;;) {
      const sql = pageQuery(after);
      clock.ask();
      const stream = client.query(copyTo(`COPY (${sql}) TO STDOUT (FORMAT csv)`));
      const completed = commandCompleted(stream);
      const tail = new Tail();
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        clock.chunk();
        bytes += chunk.length;
        tail.push(chunk);
      }
      await completed; // rowCount arrives after the end of the data
      clock.ended();
      pages++;
      rows += stream.rowCount;
      if (stream.rowCount < limit) break;
      after = positionOf(tail.lastField());
    }
  } finally {
    client.release();
  }
  return { name, rows, bytes, pages, seconds: Number(process.hrtime.bigint() - started) / 1e9, page: clock.times() };
}

/**
 * A full export as a loader pages it: each page's bytes go through `onChunk` (counted, their lines
 * counted, the tail kept), the next page starts from the last row's `_cursor`, and a page with fewer
 * rows than `limit` ends it.
 */
async function pageThroughCursors(
  limit: number,
  readPage: (cursor: string | undefined, onChunk: (chunk: Uint8Array) => void) => Promise<void>,
) {
  const clock = new PageClock();
  let rows = 0;
  let bytes = 0;
  let pages = 0;
  let cursor: string | undefined;
  for (;;) {
    const tail = new Tail();
    let lines = 0;
    clock.ask();
    await readPage(cursor, (chunk) => {
      clock.chunk();
      bytes += chunk.byteLength;
      lines += countLines(chunk);
      tail.push(chunk);
    });
    clock.ended();
    pages++;
    const pageRows = lines - 1;
    rows += pageRows;
    if (pageRows < limit) break;
    cursor = tail.lastField();
  }
  return { rows, bytes, pages, page: clock.times() };
}

/** (b) A full export through the export service's gRPC stream, as the gateway consumes it. */
export async function measureGrpc(address: string, organizationId: string, datasetKey: string, limit: number): Promise<Measurement> {
  const client = createClient(ExportService, address);
  const started = process.hrtime.bigint();
  try {
    const counted = await pageThroughCursors(
      limit,
      (cursor, onChunk) =>
        new Promise<void>((resolve, reject) => {
          const stream = client.exportCsv({ organizationId, datasetKey, limit, ...(cursor ? { cursor } : {}) });
          stream.on("data", (msg: { data: Uint8Array }) => onChunk(msg.data));
          stream.on("error", (err) => reject(fromServiceError(err)));
          stream.on("end", () => resolve());
        }),
    );
    return { name: "export service (gRPC)", ...counted, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
  } finally {
    client.close();
  }
}

/**
 * (c) Optional: the public HTTP endpoint (gateway in front), when a base URL and key are given. The
 * client is node:http on one keep-alive connection, reading the body as Buffers: `fetch` (WHATWG
 * streams) spent 2-3 µs of CPU per row in the bench process, on the same two cores as the services
 * it measures (docs/benchmarks-history.md, "Stored cursors").
 */
export async function measureHttp(baseUrl: string, apiKey: string, datasetKey: string, limit: number, gzip = false): Promise<Measurement> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const started = process.hrtime.bigint();
  try {
    const counted = await pageThroughCursors(limit, (cursor, onChunk) =>
      getBody(csvPageUrl(baseUrl, datasetKey, limit, cursor), { authorization: `Bearer ${apiKey}`, "accept-encoding": gzip ? "gzip" : "identity" }, agent, onChunk),
    );
    const name = gzip ? "HTTP API, gzip (decoded bytes)" : "HTTP API (gateway)";
    return { name, ...counted, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
  } finally {
    agent.destroy();
  }
}

function csvPageUrl(baseUrl: string, datasetKey: string, limit: number, cursor: string | undefined): URL {
  const url = new URL(`/v1/datasets/${encodeURIComponent(datasetKey)}/csv`, baseUrl);
  url.searchParams.set("limit", String(limit));
  if (cursor) url.searchParams.set("cursor", cursor);
  return url;
}

/** One GET whose (decoded) body goes to `onChunk`; a status other than 200 rejects with the body's text. */
function getBody(url: URL, headers: Record<string, string>, agent: http.Agent, onChunk: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers }, (res) => {
      const body: Readable = res.headers["content-encoding"] === "gzip" ? res.pipe(createGunzip()) : res;
      if (res.statusCode !== 200) {
        const parts: Buffer[] = [];
        body.on("data", (c: Buffer) => parts.push(c));
        body.on("end", () => reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(parts).toString("utf8")}`)));
        return;
      }
      body.on("data", onChunk);
      body.on("end", resolve);
      body.on("error", reject);
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/** A codec whose `_cursor` is the payload only (no MAC), to measure what the MAC costs per row. */
export class UnsignedCursorCodec extends CursorCodec {
  override sqlExpression(_binding: unknown, columns: { lastModified: string; id: string; rowIndex?: string }): string {
    return `encode('\\x0100'::bytea || timestamptz_send(${columns.lastModified}) || uuid_send(${columns.id}) || '\\x00000000'::bytea, 'base64')`;
  }
}

/** The position in an (unsigned or signed) cursor's payload. */
export function payloadPosition(cursor: string): CursorPosition {
  const bytes = Buffer.from(cursor, "base64");
  const hex = bytes.subarray(10, 26).toString("hex");
  return {
    lastModifiedMicros: bytes.readBigInt64BE(2) + PG_EPOCH_OFFSET_MICROS,
    id: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
    rowIndex: bytes.readInt32BE(26),
  };
}
