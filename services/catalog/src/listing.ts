import { createHash } from "node:crypto";
import { CURSOR_COLUMN, FIXED_DATASETS, type RegistryEntry } from "@exportsvc/datasets";

export interface ListingColumn {
  key: string;
  dataType: string;
  label?: string;
}

export interface ListingEntry {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: string[];
  columns: ListingColumn[];
  csvPath: string;
  changeToken: string;
}

export interface Listing {
  datasets: ListingEntry[];
  /** Strong validator, quoted as sent in the ETag header. */
  etag: string;
}

const FIXED_ORDER = new Map(FIXED_DATASETS.map((d, i) => [d.key, i]));

const isFixed = (e: RegistryEntry) => (e.kind === "resource" || e.kind === "deviations") && FIXED_ORDER.has(e.key);

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Listing order: the fixed datasets in FIXED_DATASETS order, then form datasets by display name
 * (case-insensitive, code-point order, so the order does not depend on the server's locale), then key.
 * A grid's display name starts with its form's name, so a form's datasets sit together.
 */
export function listingOrder(entries: readonly RegistryEntry[]): RegistryEntry[] {
  const fixed = entries.filter(isFixed).sort((a, b) => FIXED_ORDER.get(a.key)! - FIXED_ORDER.get(b.key)!);
  const forms = entries
    .filter((e) => !isFixed(e))
    .sort((a, b) => byCodePoint((a.displayName ?? a.key).toLowerCase(), (b.displayName ?? b.key).toLowerCase()) || byCodePoint(a.key, b.key));
  return [...fixed, ...forms];
}

const sha256 = (text: string) => createHash("sha256").update(text, "utf8");

/**
 * The dataset's changeToken: moves when its own change counter moves (its records were inserted,
 * updated or deleted) or when it was regenerated (generation, row shape). Nothing else feeds it, so
 * related-record renames and relabelling leave it alone.
 */
export function changeToken(entry: RegistryEntry): string {
  return sha256(JSON.stringify([entry.key, entry.generation, entry.shapeFingerprint, entry.changeCounter]))
    .digest("base64url")
    .slice(0, 22);
}

/** `links.csv`: rooted at the host, already containing /v1. */
export function csvPath(key: string): string {
  return `/v1/datasets/${encodeURIComponent(key)}/csv`;
}

/** The listing of one organization's datasets plus its ETag, from its live registry entries. */
export function buildListing(entries: readonly RegistryEntry[]): Listing {
  const ordered = listingOrder(entries);
  const listed = new Set(ordered.map((e) => e.key));
  const datasets = ordered.map((e): ListingEntry => {
    const entry: ListingEntry = {
      key: e.key,
      childDatasets: ordered.filter((c) => c.kind === "grid" && c.parentKey === e.key).map((c) => c.key),
      columns: [
        ...e.columns.map((c) => (c.label !== undefined ? { key: c.key, dataType: c.dataType, label: c.label } : { key: c.key, dataType: c.dataType })),
        { key: CURSOR_COLUMN.key, dataType: CURSOR_COLUMN.dataType },
      ],
      csvPath: csvPath(e.key),
      changeToken: changeToken(e),
    };
    // Resource datasets never show a display name, whatever the registry holds.
    if (e.displayName !== undefined && e.kind !== "resource") entry.displayName = e.displayName;
    if (e.kind === "grid" && e.parentKey !== undefined && listed.has(e.parentKey)) entry.parentDataset = e.parentKey;
    return entry;
  });
  return { datasets, etag: listingEtag(datasets) };
}

/** Strong ETag over everything the listing shows, so it moves exactly when something in it moved. */
export function listingEtag(datasets: readonly ListingEntry[]): string {
  const material = datasets.map((d) => [
    d.key,
    d.displayName ?? null,
    d.parentDataset ?? null,
    d.childDatasets,
    d.columns.map((c) => [c.key, c.dataType, c.label ?? null]),
    d.csvPath,
    d.changeToken,
  ]);
  return `"${sha256(JSON.stringify(material)).digest("base64url").slice(0, 32)}"`;
}
