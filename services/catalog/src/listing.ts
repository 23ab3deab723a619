import * as crypto from "node:crypto";
import { CURSOR_COLUMN, datasetHorizon, FIXED_DATASETS, isSettled, type ListingHorizon, type RegistryEntry } from "@exportsvc/datasets";

export interface ListingColumn {
  key: string;
  dataType: string;
  label?: string;
}

export interface ListingEntry {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: readonly string[];
  columns: ListingColumn[];
  csvPath: string;
  /** `links.deletions`: the dataset's deletion feed. */
  deletionsPath: string;
  /** `links.rewrites`: the dataset's rewrite feed (derived from the key, like the other links). */
  rewritesPath: string;
  changeToken: string;
  rewriteToken: string;
}

export interface Listing {
  datasets: ListingEntry[];
  /** Strong validator, quoted as sent in the ETag header. */
  etag: string;
  /** Every dataset's token is settled (none depends on the visibility horizon). */
  allSettled?: boolean;
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
  // Sort keys lowered once per entry, not twice per comparison.
  const forms = entries
    .filter((e) => !isFixed(e))
    .map((e) => ({ e, name: (e.displayName ?? e.key).toLowerCase() }))
    .sort((a, b) => byCodePoint(a.name, b.name) || byCodePoint(a.e.key, b.e.key))
    .map(({ e }) => e);
  return [...fixed, ...forms];
}

const NO_CHILDREN: readonly string[] = Object.freeze([]);
const LISTED_CURSOR_COLUMN: ListingColumn = Object.freeze({ key: CURSOR_COLUMN.key, dataType: CURSOR_COLUMN.dataType });

/** The registry columns as listed (key, dataType, label when present), then `_cursor`. */
function listingColumns(columns: RegistryEntry["columns"]): ListingColumn[] {
  const listed: ListingColumn[] = new Array(columns.length + 1);
  for (let i = 0; i < columns.length; i++) {
    const c = columns[i];
    listed[i] = c.label !== undefined ? { key: c.key, dataType: c.dataType, label: c.label } : { key: c.key, dataType: c.dataType };
  }
  listed[columns.length] = LISTED_CURSOR_COLUMN;
  return listed;
}

/**
 * base64url SHA-256 of UTF-8 text. One-shot crypto.hash (Node >= 20.12) is several times faster
 * than createHash for inputs this small, and a listing hashes two per dataset (issue 15: 10k datasets).
 */
const sha256 = (text: string): string =>
  typeof crypto.hash === "function" ? crypto.hash("sha256", text, "base64url") : crypto.createHash("sha256").update(text, "utf8").digest("base64url");

/**
 * What the CSV endpoint would serve of the dataset's counted changes right now: "settled" when
 * every counted row is before the visibility horizon (what every page uses from now on, the floor
 * guarantees), otherwise the horizon itself, so the token moves again each time the horizon moves
 * and held-back rows become servable (docs/catalog.md, "What a changeToken promises").
 */
export type TokenVisibility = "settled" | { heldBeforeMicros: bigint };

export function tokenVisibility(entry: RegistryEntry, horizon: ListingHorizon): TokenVisibility {
  const before = datasetHorizon(horizon, entry);
  return isSettled(entry.settlesAtMicros, before) ? "settled" : { heldBeforeMicros: before };
}

/**
 * The dataset's changeToken: moves when its own change counter moves (its records were inserted,
 * updated or deleted), when it was regenerated (generation, row shape), or when rows it counted
 * become servable (visibility). Nothing else feeds it, so related-record renames and relabelling
 * leave it alone. A settled dataset's token is the same as before visibility fed the token.
 */
export function changeToken(entry: RegistryEntry, visibility: TokenVisibility = "settled"): string {
  const material: unknown[] = [entry.key, entry.generation, entry.shapeFingerprint, entry.changeCounter];
  if (visibility !== "settled") material.push(`held-before:${visibility.heldBeforeMicros}`);
  return sha256(JSON.stringify(material)).slice(0, 22);
}

/**
 * The dataset's rewriteToken: moves when rows' exported text may have changed without their
 * last_modified moving, so a client re-reads the dataset in full only then. It moves when the dataset
 * is regenerated (generation: a republish re-renders every row, e.g. a relabelled option or a
 * retyped field; a time zone change rebuilds the form). Renamed, deleted or newly named related
 * records, relations and borrowed columns go through the rewrite feed instead (migration 120) and
 * move changeToken; the two counters below no longer move for them and stay in the material so that
 * tokens handed out before the feed existed hold. New rows and edits move changeToken, not this.
 */
export function rewriteToken(entry: RegistryEntry): string {
  const material: unknown[] = ["rewrite", entry.key, entry.generation, entry.rewriteCounter];
  if (entry.datasetRewriteCounter !== "0") material.push(entry.datasetRewriteCounter);
  return sha256(JSON.stringify(material)).slice(0, 22);
}

/** `links.csv`: rooted at the host, already containing /v1. */
export function csvPath(key: string): string {
  return `/v1/datasets/${encodeURIComponent(key)}/csv`;
}

/** `links.rewrites`: rooted at the host, already containing /v1. */
export function rewritesPath(key: string): string {
  return `/v1/datasets/${encodeURIComponent(key)}/rewrites`;
}

/** `links.deletions`: rooted at the host, already containing /v1. */
export function deletionsPath(key: string): string {
  return `/v1/datasets/${encodeURIComponent(key)}/deletions`;
}

/**
 * The listing of one organization's datasets plus its ETag, from its live registry entries and the
 * visibility horizon read after them (undefined: every dataset treated as settled, for callers that
 * only need the shape). With `settledEtag`, that is the ETag when every token is settled.
 */
export function buildListing(entries: readonly RegistryEntry[], horizon?: ListingHorizon, settledEtag?: string): Listing {
  const ordered = listingOrder(entries);
  const listed = new Set(ordered.map((e) => e.key));
  // Grids by parent key, in listing order: one pass instead of filtering every entry for every entry.
  const children = new Map<string, string[]>();
  for (const c of ordered) {
    if (c.kind !== "grid" || c.parentKey === undefined) continue;
    const list = children.get(c.parentKey);
    if (list) list.push(c.key);
    else children.set(c.parentKey, [c.key]);
  }
  let allSettled = true;
  const datasets = ordered.map((e): ListingEntry => {
    const visibility = horizon ? tokenVisibility(e, horizon) : "settled";
    if (visibility !== "settled") allSettled = false;
    const entry: ListingEntry = {
      key: e.key,
      // Shared, never mutated: fewer allocations per entry (garbage collection was a fifth of a 10k build).
      childDatasets: children.get(e.key) ?? NO_CHILDREN,
      columns: listingColumns(e.columns),
      csvPath: csvPath(e.key),
      deletionsPath: deletionsPath(e.key),
      rewritesPath: rewritesPath(e.key),
      changeToken: changeToken(e, visibility),
      rewriteToken: rewriteToken(e),
    };
    // Resource datasets never show a display name, whatever the registry holds.
    if (e.displayName !== undefined && e.kind !== "resource") entry.displayName = e.displayName;
    if (e.kind === "grid" && e.parentKey !== undefined && listed.has(e.parentKey)) entry.parentDataset = e.parentKey;
    return entry;
  });
  const settled = horizon !== undefined && allSettled;
  // settledEtag: the organization's version ETag, used (and the content hash not computed) when every token is settled.
  return { datasets, etag: settled && settledEtag !== undefined ? settledEtag : listingEtag(datasets), allSettled: settled };
}

/**
 * The listing's ETag while every dataset is settled: from the organization's stored listing version
 * (dataset_listing_versions, migration 085), which moves whenever anything the listing is built from
 * moves, so a 304 needs no listing (docs/catalog.md, "A cheap 304"). A different prefix from
 * listingEtag's hashes is not needed: both are 32 characters of SHA-256.
 */
export function versionEtag(organizationId: string, version: string): string {
  return `"${sha256(JSON.stringify(["listing-version", organizationId.toLowerCase(), version])).slice(0, 32)}"`;
}

/**
 * One listing entry as the API shows it (docs/contract.md §3), as JSON text: fields in this order,
 * absent values omitted (JSON.stringify drops undefined), never null. The one place the entry's
 * public shape is written; the gateway passes the text through (docs/catalog.md, "Streaming the listing").
 */
export function renderEntry(entry: ListingEntry): string {
  return JSON.stringify({
    key: entry.key,
    displayName: entry.displayName,
    parentDataset: entry.parentDataset,
    childDatasets: entry.childDatasets,
    columns: entry.columns,
    links: { csv: entry.csvPath, deletions: entry.deletionsPath, rewrites: entry.rewritesPath },
    changeToken: entry.changeToken,
    rewriteToken: entry.rewriteToken,
  });
}

/** Entry pieces are about this many bytes: tens of KiB, like the CSV export's chunks. */
export const LISTING_PIECE_BYTES = 64 * 1024;

/**
 * The listing's entries rendered (renderEntry) and cut into pieces of about `pieceBytes`, each
 * ending between two entries; a piece after the first starts with the separating comma, so the
 * pieces concatenated are the JSON array's contents without its brackets (the gateway adds those).
 */
export function renderPieces(datasets: readonly ListingEntry[], pieceBytes = LISTING_PIECE_BYTES): Buffer[] {
  const pieces: Buffer[] = [];
  let parts: string[] = [];
  let size = 0;
  for (let i = 0; i < datasets.length; i++) {
    const text = renderEntry(datasets[i]);
    parts.push(i > 0 && parts.length === 0 ? `,${text}` : text);
    size += text.length + 1;
    if (size >= pieceBytes) {
      pieces.push(Buffer.from(parts.join(","), "utf8"));
      parts = [];
      size = 0;
    }
  }
  if (parts.length > 0) pieces.push(Buffer.from(parts.join(","), "utf8"));
  return pieces;
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
    d.deletionsPath,
    d.changeToken,
    d.rewriteToken,
  ]);
  return `"${sha256(JSON.stringify(material)).slice(0, 32)}"`;
}
