import type { Pool } from "pg";
import { BoundedMap, type Logger } from "@exportsvc/common";
import { COUNT_SITES_SQL } from "@exportsvc/datasets";

export interface SiteCountsOptions {
  /** A count older than this is read again (the page still uses it meanwhile). */
  ttlMs: number;
  /** Organizations remembered; the least recently read is forgotten first. */
  maxOrganizations: number;
  logger?: Logger;
  now?: () => number;
}

/**
 * Each organization's number of sites as last read, for siteNameLookup (how a submission page reads
 * its site names). Both lookups give the same text, so a stale or missing count only costs speed and
 * a page never waits for one: a missing or expired count is read in the background, one read per
 * organization at a time, and the page goes on with what is known (the join when nothing is).
 */
export class SiteCounts {
  private readonly known: BoundedMap<string, { sites: number; readAt: number }>;
  private readonly reading = new Map<string, Promise<void>>();
  private readonly now: () => number;

  constructor(
    private readonly pool: Pool,
    private readonly options: SiteCountsOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.known = new BoundedMap(options.maxOrganizations);
  }

  /** The organization's last read count (undefined: none yet); starts a read when it is missing or expired. */
  get(organizationId: string): number | undefined {
    const entry = this.known.get(organizationId);
    if (!entry || this.now() - entry.readAt >= this.options.ttlMs) this.read(organizationId);
    return entry?.sites;
  }

  /** Resolves once no read is in flight (tests). */
  async settled(): Promise<void> {
    await Promise.all(this.reading.values());
  }

  private read(organizationId: string): void {
    if (this.reading.has(organizationId)) return;
    const reading = this.pool
      .query<{ sites: number }>({ ...COUNT_SITES_SQL, values: [organizationId] })
      .then(
        ({ rows }) => this.known.set(organizationId, { sites: rows[0].sites, readAt: this.now() }),
        (err: Error) => this.options.logger?.debug({ organizationId, err: err.message }, "site count not read; pages use the join"),
      )
      .finally(() => this.reading.delete(organizationId));
    this.reading.set(organizationId, reading);
  }
}
