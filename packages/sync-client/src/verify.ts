/** `verify`: the copy against a fresh full export, per dataset: row count and checksum. */
import type { ExportApiClient } from "./api/client";
import { isGridDataset, type ListingEntry } from "./api/types";
import { Checksum } from "./checksum";
import { readCsvPage } from "./csv";
import type { Target } from "./targets/target";

export interface VerifyResult {
  dataset: string;
  ok: boolean;
  source: { rows: number; checksum: string };
  copy: { rows: number; checksum: string } | null;
}

/** Pages the whole dataset (the spec's loop) reading only id, row_index and last_modified. */
export async function exportChecksum(client: ExportApiClient, entry: ListingEntry, limit = 5000): Promise<Checksum> {
  const sum = new Checksum();
  let cursor: string | null = null;
  for (;;) {
    const res = await client.openPage(entry, { cursor, limit });
    const page = await readCsvPage(res.body, res.request);
    const id = page.header.indexOf("id");
    const rowIndex = page.header.indexOf("row_index");
    const lastModified = page.header.indexOf("last_modified");
    const cursorAt = page.header.indexOf("_cursor");
    let count = 0;
    for await (const row of page.rows) {
      count++;
      sum.add(row[id] ?? "", rowIndex >= 0 ? row[rowIndex] ?? "" : "", row[lastModified] ?? "");
      cursor = row[cursorAt];
    }
    if (count < limit) return sum;
  }
}

export async function verify(client: ExportApiClient, target: Target, opts: { only?: string[]; onResult?: (r: VerifyResult) => void } = {}): Promise<VerifyResult[]> {
  const listing = await client.listing();
  if (listing.notModified) throw new Error("unexpected 304 without If-None-Match");
  const results: VerifyResult[] = [];
  for (const entry of listing.datasets) {
    if (opts.only && !opts.only.includes(entry.key)) continue;
    const source = await exportChecksum(client, entry);
    const copy = await target.summarize(entry.key, isGridDataset(entry));
    const result: VerifyResult = {
      dataset: entry.key,
      ok: copy !== null && copy.rows === source.rows && copy.checksum === source.value,
      source: { rows: source.rows, checksum: source.value },
      copy,
    };
    // An empty dataset with no table yet is not a difference.
    if (!copy && source.rows === 0) result.ok = true;
    results.push(result);
    opts.onResult?.(result);
  }
  return results;
}
