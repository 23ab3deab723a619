/** `verify`: the copy against a fresh full export, per dataset, row by row and value by value. */
import type { ExportApiClient } from "./api/client";
import { StreamAbortedError } from "./api/errors";
import { CURSOR_COLUMN, type ListingEntry } from "./api/types";
import { readCsvPage, type Cell } from "./csv";
import { notListedMessage } from "./dataset-keys";
import { planTable } from "./engine";
import type { ContentDifferences, Target } from "./targets/target";

export interface VerifyResult {
  dataset: string;
  ok: boolean;
  source: { rows: number };
  /** Null: the copy has no table for the dataset. */
  copy: { rows: number } | null;
  /** Rows of the export missing from the copy, rows of the copy the export did not return, rows whose values differ, keys the export returned twice. */
  missing: number;
  extra: number;
  changed: number;
  duplicated: number;
  /** Columns of the export the copy's table does not have (a sync has not seen them yet). */
  missingColumns: string[];
  /** A few of the differences, e.g. `changed id=… (city, last_modified)`. */
  examples: string[];
  /** Why the dataset could not be compared at all (a `--datasets` key the listing does not have). */
  problem?: string;
}

/** A full export of one dataset: the header of its first page, then every row of every page (the loop of docs/contract.md §4). */
export async function openFullExport(client: ExportApiClient, entry: ListingEntry, limit = 5000): Promise<{ header: string[]; rows: AsyncIterable<Cell[]> }> {
  let page = await client.openPage(entry, { cursor: null, limit });
  let reader = await readCsvPage(page.body, page.request);
  const header = reader.header;
  const cursorAt = header.indexOf(CURSOR_COLUMN);
  if (cursorAt < 0) {
    page.body.destroy();
    throw new StreamAbortedError(page.request, reader.bytes(), new Error("the header has no _cursor column"));
  }
  async function* rows(): AsyncGenerator<Cell[]> {
    for (;;) {
      let count = 0;
      let cursor: string | null = null;
      for await (const row of reader.rows) {
        count++;
        cursor = row[cursorAt];
        yield row;
      }
      if (count < limit) return;
      page = await client.openPage(entry, { cursor, limit });
      reader = await readCsvPage(page.body, page.request);
      if (reader.header.join("\u0000") !== header.join("\u0000")) {
        page.body.destroy();
        throw new Error(`${entry.key}: the columns changed during the export (a publish?); run verify again`);
      }
    }
  }
  return { header, rows: rows() };
}

/**
 * Compares every listed dataset (or `only` those) with a fresh full export: each exported row is
 * converted as a sync would store it and compared with the copy's row of the same key, every
 * column included. Changes nothing in the copy.
 */
export async function verify(client: ExportApiClient, target: Target, opts: { only?: string[]; onResult?: (r: VerifyResult) => void } = {}): Promise<VerifyResult[]> {
  const listing = await client.listing();
  if (listing.notModified) throw new Error("unexpected 304 without If-None-Match");
  const state = await target.loadState();
  const results: VerifyResult[] = [];
  const listed = new Set(listing.datasets.map((e) => e.key));
  for (const key of opts.only ?? []) {
    if (listed.has(key)) continue;
    const result: VerifyResult = {
      dataset: key,
      ok: false,
      source: { rows: 0 },
      copy: null,
      missing: 0,
      extra: 0,
      changed: 0,
      duplicated: 0,
      missingColumns: [],
      examples: [],
      problem: notListedMessage(key, listed),
    };
    results.push(result);
    opts.onResult?.(result);
  }
  for (const entry of listing.datasets) {
    if (opts.only && !opts.only.includes(entry.key)) continue;
    const synced = state.datasets.get(entry.key);
    const { header, rows } = await openFullExport(client, entry);
    const plan = { ...planTable(entry), ...(synced ? { table: synced.table, columns: synced.columns } : {}) };
    const differences = synced ? await target.compareContent({ plan, header, rows }) : null;
    const result = differences ? fromDifferences(entry.key, differences, header, plan.columns) : await noCopy(entry.key, rows);
    results.push(result);
    opts.onResult?.(result);
  }
  return results;
}

function fromDifferences(dataset: string, d: ContentDifferences, header: string[], columns: Record<string, string>): VerifyResult {
  const missingColumns = header.filter((key) => key !== CURSOR_COLUMN && !(key in columns));
  const differs = d.missing + d.extra + d.changed + d.duplicated > 0 || (missingColumns.length > 0 && d.sourceRows > 0);
  return {
    dataset,
    ok: !differs,
    source: { rows: d.sourceRows },
    copy: { rows: d.copyRows },
    missing: d.missing,
    extra: d.extra,
    changed: d.changed,
    duplicated: d.duplicated,
    missingColumns,
    examples: d.examples,
  };
}

/** No table in the copy: a difference unless the dataset is empty. */
async function noCopy(dataset: string, rows: AsyncIterable<Cell[]>): Promise<VerifyResult> {
  let count = 0;
  for await (const _ of rows) count++;
  return { dataset, ok: count === 0, source: { rows: count }, copy: null, missing: count, extra: 0, changed: 0, duplicated: 0, missingColumns: [], examples: [] };
}
