import type { to as copyTo } from "pg-copy-streams";

/**
 * Resolves once PostgreSQL reported the end of the statement (CommandComplete, then ReadyForQuery).
 * The COPY stream ends at CopyDone, which can arrive in an earlier packet: rowCount is only known after.
 */
export function commandCompleted(stream: ReturnType<typeof copyTo>): Promise<void> {
  return new Promise((resolve) => {
    const target = stream as unknown as { handleReadyForQuery(connection: unknown): void };
    const original = target.handleReadyForQuery.bind(stream);
    target.handleReadyForQuery = (connection) => {
      original(connection);
      resolve();
    };
  });
}

/**
 * Turns the output of `COPY ... TO STDOUT (FORMAT text)` of ONE text column back into the column's
 * values, each followed by a newline: PostgreSQL writes a backslash before a backslash and
 * writes \b \f \n \r \t \v for those control characters; nothing else is escaped (with one column,
 * the tab delimiter never appears unescaped). Every backslash starts an escape, so one left-to-right
 * pass is exact; an escape cut by a chunk boundary is completed by the next chunk. A chunk with no
 * backslash passes through as is. Used for pages of rendered datasets, whose one column is the CSV
 * record already (docs/export.md, "Rendered datasets").
 */
export class CopyTextUnescaper {
  private pendingBackslash = false;

  push(chunk: Buffer): Buffer {
    if (!this.pendingBackslash && chunk.indexOf(BACKSLASH) < 0) return chunk;
    const out = Buffer.allocUnsafe(chunk.length + 1);
    let length = 0;
    let pos = 0;
    if (this.pendingBackslash) {
      if (chunk.length === 0) return chunk;
      out[length++] = unescaped(chunk[0]);
      this.pendingBackslash = false;
      pos = 1;
    }
    for (;;) {
      const at = chunk.indexOf(BACKSLASH, pos);
      const end = at < 0 ? chunk.length : at;
      length += chunk.copy(out, length, pos, end);
      if (at < 0) break;
      if (at + 1 === chunk.length) {
        this.pendingBackslash = true;
        break;
      }
      out[length++] = unescaped(chunk[at + 1]);
      pos = at + 2;
    }
    return out.subarray(0, length);
  }

  /** Throws when the stream ended inside an escape (it was cut short). */
  end(): void {
    if (this.pendingBackslash) throw new Error("COPY text output ended inside an escape");
  }
}

const BACKSLASH = 0x5c;

/** The byte each text-format escape `\<c>` stands for, by `<c>` (PostgreSQL's CopyAttributeOutText). */
const UNESCAPED = new Map<number, number>([
  [0x62 /* b */, 0x08],
  [0x66 /* f */, 0x0c],
  [0x6e /* n */, 0x0a],
  [0x72 /* r */, 0x0d],
  [0x74 /* t */, 0x09],
  [0x76 /* v */, 0x0b],
  [BACKSLASH, BACKSLASH],
]);

function unescaped(c: number): number {
  const byte = UNESCAPED.get(c);
  if (byte === undefined) throw new Error(`unexpected escape \\${String.fromCharCode(c)} in COPY text output of one column`);
  return byte;
}
