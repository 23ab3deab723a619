/**
 * What a process remembers about an organization's listing at one listing version
 * (dataset_listing_versions, migration 085; docs/catalog.md, "A cheap 304"). The catalog keeps the
 * rendered pieces too; the gateway keeps only the verdicts the catalog sent it (maxBytes 0):
 *
 * - that every dataset was settled at that version (no token depended on the visibility horizon),
 *   so its ETag is the version ETag. That stays true while the version does: anything that could
 *   hold a token (a counted change, i.e. a moved settles_at) moves the version, a pending form
 *   change is checked on every request, and a settled token never depends on the horizon again.
 * - the listing's rendered entry pieces, so an unchanged listing is streamed without reading the
 *   registry, computing the horizon or rendering 10k entries again.
 *
 * An entry is only ever valid for its version; a newer version replaces it. Least recently used
 * organizations are dropped first once the rendered pieces pass `maxBytes` (0: nothing rendered is
 * kept, only the settled verdicts).
 *
 * Pieces are kept from the second listing rendered at a version on (`rendered`). A consumer polling
 * with If-None-Match needs only the verdict, so pieces kept at the first rendering were mostly
 * replaced unread by the next version. Replaced pieces have lived long enough to reach V8's old
 * generation, and their memory, outside the heap, returns only at a full collection, which external
 * memory alone triggers some 64 MB later: under steady churn the catalog's RSS climbed by that much
 * (docs/soak.md, "Later runs").
 */
export interface SettledListing {
  version: string;
  etag: string;
  /** The rendered entry pieces, when they fit the budget. */
  pieces?: readonly Buffer[];
  bytes: number;
  /** A listing was rendered at this version and its pieces not kept (the next rendering keeps them). */
  renderedOnce?: true;
}

/** Settled verdicts are tiny; this many organizations are remembered at most. */
const MAX_ORGANIZATIONS = 100_000;

export class ListingCache {
  private readonly entries = new Map<string, SettledListing>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** The newest settled listing remembered for the organization, whatever the version is now. */
  latest(organizationId: string): SettledListing | undefined {
    return this.entries.get(organizationId);
  }

  /** The organization's settled listing at exactly `version`, if remembered. */
  get(organizationId: string, version: string): SettledListing | undefined {
    const entry = this.entries.get(organizationId);
    if (!entry || entry.version !== version) return undefined;
    // Most recently used last: Map keeps insertion order.
    this.entries.delete(organizationId);
    this.entries.set(organizationId, entry);
    return entry;
  }

  /** Remembers that the listing at `version` was all settled, with its pieces when they fit. */
  set(organizationId: string, version: string, etag: string, pieces?: readonly Buffer[]): void {
    const previous = this.entries.get(organizationId);
    // A slower request that read an older version must not replace a newer entry.
    if (previous && BigInt(previous.version) > BigInt(version)) return;
    // A verdict alone (the cheap 304) must not drop the pieces a listing at the same version rendered.
    if (previous && previous.version === version && previous.pieces && !pieces) return;
    this.remove(organizationId);
    const size = pieces ? pieces.reduce((n, p) => n + p.length, 0) : 0;
    const keep = pieces !== undefined && size <= this.maxBytes;
    const entry: SettledListing = keep ? { version, etag, pieces, bytes: size } : { version, etag, bytes: 0 };
    this.entries.set(organizationId, entry);
    this.bytes += entry.bytes;
    // Least recently used first: drop rendered pieces (keeping the verdict) until within the budget...
    for (const [org, older] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      if (org === organizationId || !older.pieces) continue;
      this.bytes -= older.bytes;
      this.entries.set(org, { version: older.version, etag: older.etag, bytes: 0 }); // same key: same place
    }
    // ...then whole organizations beyond the cap.
    for (const org of this.entries.keys()) {
      if (this.entries.size <= MAX_ORGANIZATIONS) break;
      this.remove(org);
    }
  }

  /**
   * A listing rendered at `version` with every token settled: its verdict is remembered, and its
   * pieces too if a listing was already rendered at this version (see above).
   */
  rendered(organizationId: string, version: string, etag: string, pieces: readonly Buffer[]): void {
    const previous = this.entries.get(organizationId);
    if (previous?.version === version && previous.renderedOnce) return this.set(organizationId, version, etag, pieces);
    this.set(organizationId, version, etag);
    const entry = this.entries.get(organizationId);
    if (entry?.version === version && !entry.pieces) entry.renderedOnce = true;
  }

  private remove(organizationId: string): void {
    const entry = this.entries.get(organizationId);
    if (!entry) return;
    this.bytes -= entry.bytes;
    this.entries.delete(organizationId);
  }
}
