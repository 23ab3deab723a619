/**
 * Streaming CSV reading of one page with csv-parse: the BOM, the page's own header row, fields of
 * any length, embedded quotes and newlines. The dialect (docs/contract.md §5): an empty quoted field is
 * an empty string, an empty unquoted field is a null.
 */
import { PassThrough, type Readable } from "node:stream";
import { parse } from "csv-parse";
import { parse as parseSync } from "csv-parse/sync";
import { StreamAbortedError } from "./api/errors";

export type Cell = string | null;

export interface CsvPageReader {
  header: string[];
  /** The page's records, each aligned with `header`. */
  rows: AsyncIterable<Cell[]>;
  /** Bytes of the body read so far. */
  bytes(): number;
}

/**
 * Reads the header, then hands out the rows as they stream. Any failure of the body (connection
 * aborted, a record cut off, a body that does not end with a record terminator) surfaces as a
 * StreamAbortedError, so the caller fails the whole page.
 */
export async function readCsvPage(body: Readable, request: string): Promise<CsvPageReader> {
  let bytes = 0;
  let lastByte = -1;
  body.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (chunk.length) lastByte = chunk[chunk.length - 1];
  });
  const parser = parse({
    bom: true,
    // Reference fields run to hundreds of thousands of characters: no record size cap.
    max_record_size: 0,
    relax_column_count: false,
    // Each record with its raw text: an empty field is null unless it was quoted (see nullsFromRaw).
    // (A `cast` function gives the same answer through a per-field context object, ~10x slower.)
    raw: true,
  });
  let bodyError: unknown;
  body.on("error", (err) => {
    bodyError = err;
    parser.destroy(err);
  });
  body.pipe(parser);
  const parsed = parser[Symbol.asyncIterator]() as AsyncIterator<{ record: string[]; raw: string }>;
  const records: AsyncIterator<Cell[]> = {
    next: async () => {
      const r = await parsed.next();
      return r.done ? r : { done: false, value: nullsFromRaw(r.value.record, r.value.raw) };
    },
  };
  const fail = (err: unknown) => {
    body.destroy();
    return new StreamAbortedError(request, bytes, bodyError ?? err);
  };
  let first: IteratorResult<Cell[]>;
  try {
    first = await records.next();
  } catch (err) {
    throw fail(err);
  }
  if (first.done) throw fail(new Error("empty body: no header row"));
  const header = first.value.map((h) => h ?? "");
  async function* rows(): AsyncGenerator<Cell[]> {
    try {
      for (;;) {
        const next = await records.next();
        if (next.done) break;
        yield next.value;
      }
    } catch (err) {
      throw fail(err);
    }
    if (bodyError) throw fail(bodyError);
    // Records end with LF: a body that stops elsewhere was cut short.
    if (lastByte !== 0x0a) throw fail(new Error("the body does not end with a record terminator"));
  }
  return { header, rows: rows(), bytes: () => bytes };
}

/**
 * The dialect tells null (empty, unquoted) from the empty string (`""`). Only records holding an
 * empty field need a look at their raw text; the position of each field in it follows from the
 * parsed values (an unquoted field is its value; a quoted one is the value with its quotes doubled,
 * between quotes), so no character is scanned twice.
 */
export function nullsFromRaw(fields: string[], raw: string): Cell[] {
  if (!fields.includes("")) return fields;
  const out: Cell[] = fields;
  let pos = 0;
  for (let i = 0; i < fields.length; i++) {
    const v = fields[i];
    if (raw.charCodeAt(pos) === 34) {
      let quotes = 0;
      for (let j = v.indexOf('"'); j !== -1; j = v.indexOf('"', j + 1)) quotes++;
      pos += v.length + quotes + 3;
    } else {
      if (v === "") out[i] = null;
      pos += v.length + 1;
    }
  }
  return out;
}

export interface RawCsvPage {
  header: string[];
  /** The body after the header row: whole CSV records, for a database that parses the dialect itself. */
  records: Readable;
  bytes(): number;
  /** Throws a StreamAbortedError unless the body ended cleanly (no error, last byte a record terminator). */
  assertCleanEnd(): void;
}

/**
 * Splits a page into its header row (parsed with csv-parse) and the raw records that follow, for a
 * target that parses the CSV dialect natively (PostgreSQL's COPY … CSV writes and reads exactly the
 * export's dialect, null vs empty string included).
 */
export async function splitCsvPage(body: Readable, request: string): Promise<RawCsvPage> {
  let bytes = 0;
  let lastByte = -1;
  let bodyError: unknown;
  const records = new PassThrough();
  // The body may fail before the target starts reading: the failure is kept in bodyError and
  // reported by assertCleanEnd, whoever reads the records.
  records.on("error", () => undefined);
  const fail = (err: unknown) => new StreamAbortedError(request, bytes, bodyError ?? err);
  let head: Buffer = Buffer.alloc(0);
  let header: string[] | undefined;
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      if (header) return;
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const lf = head.indexOf(0x0a);
      if (lf < 0) {
        if (head.length > 1_048_576) onError(new Error("no header row in the first MiB"));
        return;
      }
      const start = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
      try {
        header = (parseSync(head.subarray(start, lf + 1)) as string[][])[0] ?? [];
      } catch (err) {
        onError(err);
        return;
      }
      body.pause();
      const rest = head.subarray(lf + 1);
      if (rest.length) records.write(rest);
      body.off("data", onData);
      body.pipe(records);
      resolve();
    };
    const onError = (err: unknown) => {
      bodyError = err;
      records.destroy(err as Error);
      body.destroy();
      reject(fail(err));
    };
    body.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (chunk.length) lastByte = chunk[chunk.length - 1];
    });
    body.on("data", onData);
    body.on("error", onError);
    body.on("end", () => {
      if (!header) onError(new Error("the body ended before the header row"));
    });
  });
  return {
    header: header!,
    records,
    bytes: () => bytes,
    assertCleanEnd: () => {
      if (bodyError) throw fail(bodyError);
      if (lastByte !== 0x0a) throw fail(new Error("the body does not end with a record terminator"));
    },
  };
}
