/**
 * The copy's fingerprint, computed the same way from a stored table and from a fresh export:
 * row count plus the sum (as a decimal string) of the first 60 bits of md5("id\trow_index\tlast_modified")
 * over every row. Order-independent, so PostgreSQL computes it in SQL and the export side in a stream.
 */
import { createHash } from "node:crypto";

export class Checksum {
  rows = 0;
  private sum = 0n;
  add(id: string, rowIndex: string, lastModified: string): void {
    this.rows++;
    this.sum += BigInt(`0x${createHash("md5").update(`${id}\t${rowIndex}\t${lastModified}`).digest("hex").slice(0, 15)}`);
  }
  get value(): string {
    return this.sum.toString();
  }
}

/** The same sum in PostgreSQL over a table alias `t`. */
export const POSTGRES_CHECKSUM_SQL = (rowIndex: string) =>
  `count(*)::bigint AS rows, coalesce(sum(('x' || substr(md5(t.id::text || E'\\t' || ${rowIndex} || E'\\t' || t.last_modified::text), 1, 15))::bit(60)::bigint), 0)::text AS checksum`;
