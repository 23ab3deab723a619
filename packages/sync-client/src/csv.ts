/**
 * Streaming CSV reading of one page (CsvRecords): the BOM, the page's own header row, fields of
 * any length, embedded quotes and newlines. The dialect (docs/contract.md §5): an empty quoted field is
 * an empty string, an empty unquoted field is a null.
 */
import { PassThrough, Transform, pipeline, type Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { parse as parseSync } from "csv-parse/sync";
import { StreamAbortedError } from "./api/errors";

export type Cell = string | null;

export interface CsvPageReader {
  header: string[];
  /** The page's records, each aligned with `header`. */
  rows: AsyncIterable<Cell[]>;
  /** Bytes of the body read so far. */
  bytes(): number;
  /** Records `rows` has handed out so far. */
  rowsRead(): number;
  /** The last record `rows` handed out; null before the first. */
  lastRow(): Cell[] | null;
}

/**
 * Reads the header, then hands out the rows as they stream. Any failure of the body (connection
 * aborted, a record cut off, a body that does not end with a record terminator) surfaces as a
 * StreamAbortedError, so the caller fails the whole page.
 */
export async function readCsvPage(body: Readable, request: string): Promise<CsvPageReader> {
  let bytes = 0;
  let lastByte = -1;
  const parser = new CsvRecords();
  const chunks = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let batch: Cell[][] = [];
  let at = 0;
  /** Reads chunks until records are parsed (true) or the body ends (false). */
  const fill = async (): Promise<boolean> => {
    while (at >= batch.length) {
      const read = await chunks.next();
      if (read.done) {
        parser.end();
        return false;
      }
      bytes += read.value.length;
      if (read.value.length) lastByte = read.value[read.value.length - 1];
      batch = parser.push(read.value);
      at = 0;
    }
    return true;
  };
  const fail = (err: unknown) => {
    body.destroy();
    return new StreamAbortedError(request, bytes, err);
  };
  let headed: boolean;
  try {
    headed = await fill();
  } catch (err) {
    throw fail(err);
  }
  if (!headed) throw fail(new Error("empty body: no header row"));
  const header = batch[at++].map((h) => h ?? "");
  let rowsRead = 0;
  let last: Cell[] | null = null;
  let ended = false;
  const take = (): IteratorResult<Cell[]> => {
    rowsRead++;
    last = batch[at++];
    return { value: last, done: false };
  };
  const refill = async (): Promise<IteratorResult<Cell[]>> => {
    if (ended) return { value: undefined, done: true };
    let more: boolean;
    try {
      more = await fill();
    } catch (err) {
      ended = true;
      throw fail(err);
    }
    if (more) return take();
    ended = true;
    // Records end with LF: a body that stops elsewhere was cut short.
    if (lastByte !== 0x0a) throw fail(new Error("the body does not end with a record terminator"));
    return { value: undefined, done: true };
  };
  // A plain iterator, not an async generator: a row already parsed is handed out without a
  // generator's suspension (two generator layers cost 33 ms per 100 000 rows, this 7 ms).
  const rows: AsyncIterableIterator<Cell[]> = {
    [Symbol.asyncIterator]() {
      return rows;
    },
    next: () => (at < batch.length ? Promise.resolve(take()) : refill()),
  };
  return { header, rows, bytes: () => bytes, rowsRead: () => rowsRead, lastRow: () => last };
}

/**
 * The export's CSV dialect parsed by hand (docs/contract.md §5: comma, double quotes, LF after every
 * record, an empty unquoted field null, an empty quoted one the empty string): several times
 * faster than csv-parse, whose per-record options and events dominated a narrow page. Each chunk is
 * scanned once for its last record end (quote parity carried across chunks); the complete records
 * before it are parsed, the rest is kept for the next chunk as pieces, so a field of any length
 * costs one pass, not one per chunk it spans.
 */
export class CsvRecords {
  private readonly decoder = new StringDecoder("utf8");
  /** The record in progress: text of earlier chunks. */
  private pending: string[] = [];
  private inQuotes = false;

  /** `width`: how many fields every record has, when the header row was read elsewhere; -1: the first record (the header) sets it. */
  constructor(private width = -1) {}

  /** The complete records the chunk ends (the first record, the header, sets the width of the others). */
  push(chunk: Buffer): Cell[][] {
    let text = this.decoder.write(chunk);
    if (this.width < 0 && !this.pending.length && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    const end = this.lastRecordEnd(text);
    if (end < 0) {
      if (text) this.pending.push(text);
      return [];
    }
    const complete = this.pending.length ? this.pending.join("") + text.slice(0, end + 1) : text.slice(0, end + 1);
    this.pending = end + 1 < text.length ? [text.slice(end + 1)] : [];
    return this.parse(complete);
  }

  /** Throws unless the text ended with a complete record. */
  end(): void {
    const rest = this.decoder.end();
    if (rest || this.pending.length) throw new Error("the body does not end with a record terminator");
  }

  /** Position of the last newline of `text` outside quotes (-1: none); the quote state at its end is kept. */
  private lastRecordEnd(text: string): number {
    let last = -1;
    let pos = 0;
    let quote = -2;
    let newline = -2;
    while (pos < text.length) {
      if (quote !== -1 && quote < pos) quote = text.indexOf('"', pos);
      if (this.inQuotes) {
        if (quote < 0) break;
        this.inQuotes = false;
        pos = quote + 1;
        continue;
      }
      if (newline !== -1 && newline < pos) newline = text.indexOf("\n", pos);
      if (quote >= 0 && (newline < 0 || quote < newline)) {
        this.inQuotes = true;
        pos = quote + 1;
        continue;
      }
      if (newline < 0) break;
      last = newline;
      // Only the last record end matters: jump to the next quote, or past the last newline.
      if (quote < 0) {
        last = text.lastIndexOf("\n");
        break;
      }
      pos = newline + 1;
    }
    return last;
  }

  /** Complete records (the text ends with a record's LF, quotes balanced). */
  private parse(s: string): Cell[][] {
    const rows: Cell[][] = [];
    let p = 0;
    let comma = -2;
    let newline = -2;
    let quote = -2;
    while (p < s.length) {
      const row: Cell[] = [];
      for (;;) {
        let value: Cell;
        let end: number;
        if (s.charCodeAt(p) === 34) {
          let close = s.indexOf('"', p + 1);
          let from = p + 1;
          value = "";
          while (close >= 0 && s.charCodeAt(close + 1) === 34) {
            value += s.slice(from, close + 1);
            from = close + 2;
            close = s.indexOf('"', from);
          }
          if (close < 0) throw new Error("a quoted field is not closed");
          value += s.slice(from, close);
          end = close + 1;
        } else {
          if (comma !== -1 && comma < p) comma = s.indexOf(",", p);
          if (newline < p) newline = s.indexOf("\n", p);
          end = comma !== -1 && comma < newline ? comma : newline;
          if (quote !== -1 && quote < p) quote = s.indexOf('"', p);
          if (quote !== -1 && quote < end) throw new Error("a quote inside an unquoted field");
          value = end === p ? null : s.slice(p, end);
        }
        row.push(value);
        const next = s.charCodeAt(end);
        p = end + 1;
        if (next === 10) break;
        if (next !== 44) throw new Error("a quoted field is followed by neither a comma nor a record end");
      }
      if (this.width < 0) this.width = row.length;
      else if (row.length !== this.width) throw new Error(`a record of ${row.length} fields where the header has ${this.width}`);
      rows.push(row);
    }
    return rows;
  }
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

/**
 * How far a target's reading of a page's records may run ahead of its writing them (a buffer between
 * CursorFieldReplaced and the database): with a page of up to this many bytes, the records are all
 * seen (RawPageWrite.recordsSeen) while the database is still loading them. Bounded, so a page of
 * wide rows still streams.
 */
export const PAGE_READ_AHEAD_BYTES = 8 * 1024 * 1024;

/**
 * Raw records with each record's last field, its `_cursor` (always the last column and never quoted:
 * its characters need no quoting), replaced by a fixed value: PostgreSQL's COPY loads such records
 * straight into a dataset's table, the value filling the generation column where the cursor stood
 * (COPY cannot skip an input field). Counts the records and keeps the last cursor for the page's
 * state. A record is held back only until its end is seen (its cursor may straddle two chunks), so
 * memory stays one record and one chunk. A last field that is empty or quoted fails the stream
 * (CursorFieldError).
 *
 * With `replacement` null the records pass as they are, counted (a reader that parses them itself
 * learns the page's size and last cursor as soon as the body has ended: recordsCounted): a last
 * field that is no cursor then only stops the counting (onEnd is not called), never the stream.
 */
export class CursorFieldReplaced extends Transform {
  /** Records passed. */
  rows = 0;
  private inQuotes = false;
  /** The record in progress, from earlier chunks. */
  private pending: Buffer[] = [];
  private last: Buffer | null = null;
  /** False once a record's last field was no cursor (pass-through only). */
  private counting = true;

  /** `onEnd`: called once the body has ended cleanly, with the records counted and the last cursor. */
  constructor(
    private readonly replacement: string | null,
    private readonly onEnd?: (page: { rows: number; lastCursor: string | null }) => void,
  ) {
    super();
  }

  /** The last record's cursor; null before any record. */
  get lastCursor(): string | null {
    return this.last ? this.last.toString("utf8") : null;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const out: Buffer[] = [];
    const value = this.replacement === null ? NEWLINE : Buffer.from(`${this.replacement}\n`);
    // `start`: the part of the chunk not emitted yet; quote and newline positions are searched once each.
    let start = 0;
    let pos = 0;
    let quote = -2;
    let newline = -2;
    while (pos < chunk.length) {
      if (quote !== -1 && quote < pos) quote = chunk.indexOf(0x22, pos);
      if (this.inQuotes) {
        if (quote < 0) break;
        this.inQuotes = false;
        pos = quote + 1;
        continue;
      }
      if (newline !== -1 && newline < pos) newline = chunk.indexOf(0x0a, pos);
      if (quote >= 0 && (newline < 0 || quote < newline)) {
        this.inQuotes = true;
        pos = quote + 1;
        continue;
      }
      if (newline < 0) break;
      const field = this.lastFieldBefore(chunk, start, newline, out);
      const isCursor = field !== null && field.length > 0 && !field.includes(0x22) && !field.includes(0x0d);
      if (this.replacement !== null) {
        if (!isCursor) return done(new CursorFieldError());
        out.push(value);
      } else if (field === null) {
        for (const piece of this.pending) out.push(piece);
        out.push(chunk.subarray(start, newline + 1));
        this.pending = [];
      } else {
        out.push(field, value);
      }
      if (isCursor) this.last = field;
      else this.counting = false;
      this.rows++;
      start = pos = newline + 1;
    }
    if (start < chunk.length) this.pending.push(start ? chunk.subarray(start) : chunk);
    if (out.length) this.push(out.length === 1 ? out[0] : Buffer.concat(out));
    done();
  }

  override _flush(done: (err?: Error | null) => void): void {
    // A record cut short (the caller's clean-end check names it).
    if (this.pending.length) return done(new Error("the body does not end with a record terminator"));
    if (this.counting) this.onEnd?.({ rows: this.rows, lastCursor: this.lastCursor });
    done();
  }

  /**
   * The record ending at `end` (a newline of `chunk`): pushes it up to and including the comma
   * before its last field onto `out` and returns that field; null, with nothing pushed, when the
   * record has no comma.
   */
  private lastFieldBefore(chunk: Buffer, start: number, end: number, out: Buffer[]): Buffer | null {
    const comma = chunk.lastIndexOf(0x2c, end);
    let field: Buffer;
    if (comma >= start) {
      for (const piece of this.pending) out.push(piece);
      out.push(chunk.subarray(start, comma + 1));
      field = chunk.subarray(comma + 1, end);
    } else {
      // The last comma lies in an earlier chunk of this record.
      let at = this.pending.length - 1;
      let inPiece = -1;
      for (; at >= 0 && inPiece < 0; at--) inPiece = this.pending[at].lastIndexOf(0x2c);
      if (inPiece < 0) return null;
      at++;
      for (let i = 0; i < at; i++) out.push(this.pending[i]);
      out.push(this.pending[at].subarray(0, inPiece + 1));
      field = Buffer.concat([this.pending[at].subarray(inPiece + 1), ...this.pending.slice(at + 1), chunk.subarray(start, end)]);
    }
    this.pending = [];
    return field;
  }
}

const NEWLINE = Buffer.from("\n");

/**
 * A page's body read ahead of its reader by up to PAGE_READ_AHEAD_BYTES, its records counted on the
 * way (CursorFieldReplaced passing them as they are): once the body has ended, `onEnd` gets the
 * records (the header row included) and the last one's `_cursor` (when it is the last column), while
 * the reader may still be working through the page. Failures reach the reader through the returned
 * stream.
 */
export function recordsCounted(body: Readable, onEnd: (page: { rows: number; lastCursor: string | null }) => void): Readable {
  const ahead = new PassThrough({ highWaterMark: PAGE_READ_AHEAD_BYTES });
  pipeline(body, new CursorFieldReplaced(null, onEnd), ahead, () => undefined);
  return ahead;
}

/** A record whose last field is not a cursor as the export writes it (unquoted, not empty). */
export class CursorFieldError extends Error {
  constructor() {
    super("a record's last field is not an unquoted _cursor");
    this.name = "CursorFieldError";
  }
}
