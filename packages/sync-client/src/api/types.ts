/**
 * The listing as the client reads it. The OpenAPI document (snapshot in ./openapi.json, types in
 * ./openapi.d.ts, regenerate with `npm run gen:api -w @exportsvc/sync-client`) names the entry's
 * columns `columns`; the contract warns (docs/contract.md §3) that a description may name them `properties`, so
 * both are accepted and unknown fields are ignored.
 */
import type { components } from "./openapi";

/** text, number, boolean, dateTime, localDateTime, date, uuid; anything else is read as text. */
export type Column = components["schemas"]["Column"];
export type ErrorCode = components["schemas"]["ErrorCode"];

/** A listing entry; `links` may carry more links than `csv` (new fields may be added within /v1). */
export type ListingEntry = Omit<components["schemas"]["DatasetListingEntry"], "links"> & {
  links: components["schemas"]["DatasetListingEntry"]["links"] & Record<string, unknown>;
};

/** One listing entry, tolerant of `properties` for `columns` and of extra fields. */
export function normalizeEntry(raw: Record<string, any>): ListingEntry {
  const columns = (Array.isArray(raw.columns) ? raw.columns : Array.isArray(raw.properties) ? raw.properties : []) as Column[];
  if (typeof raw.key !== "string" || !raw.links || typeof raw.links.csv !== "string") {
    throw new Error(`listing entry without key or links.csv: ${JSON.stringify(raw).slice(0, 200)}`);
  }
  return {
    key: raw.key,
    displayName: raw.displayName ?? undefined,
    parentDataset: raw.parentDataset ?? undefined,
    childDatasets: Array.isArray(raw.childDatasets) ? raw.childDatasets : [],
    columns: columns.map((c) => ({ key: String(c.key), dataType: String(c.dataType ?? "text"), label: c.label ?? undefined })),
    links: raw.links,
    changeToken: String(raw.changeToken ?? ""),
    // Absent on servers without the rewrite signal: the client then relies on --full-every alone.
    rewriteToken: typeof raw.rewriteToken === "string" ? raw.rewriteToken : undefined,
  };
}

/** Grid datasets are the only ones with `row_index`; they upsert on (id, row_index). */
export const isGridDataset = (entry: Pick<ListingEntry, "columns">) => entry.columns.some((c) => c.key === "row_index");

export const CURSOR_COLUMN = "_cursor";
