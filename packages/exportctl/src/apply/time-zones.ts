import type { PoolClient } from "pg";

/**
 * Problems for site time zones PostgreSQL does not know (its own list, pg_timezone_names, is what
 * the exports convert with; a zone it does not know would block the form datasets of the site, see
 * docs/form-datasets.md). Blank stays allowed (it blocks rebuilds as in the real source). Names
 * compare case-insensitively, as PostgreSQL reads them.
 */
export async function unknownTimeZoneProblems(client: PoolClient, sites: readonly { timeZone?: string }[]): Promise<string[]> {
  const zones = [...new Set(sites.map((s) => s.timeZone).filter((z): z is string => z !== undefined && z !== ""))];
  if (zones.length === 0) return [];
  const known = await client.query<{ zone: string }>(
    `SELECT z.zone FROM unnest($1::text[]) AS z(zone)
      WHERE EXISTS (SELECT 1 FROM pg_timezone_names n WHERE lower(n.name) = lower(z.zone))`,
    [zones],
  );
  const knownZones = new Set(known.rows.map((r) => r.zone));
  return sites.flatMap((site, i) =>
    site.timeZone !== undefined && site.timeZone !== "" && !knownZones.has(site.timeZone)
      ? [`sites[${i}].timeZone: ${JSON.stringify(site.timeZone)} is not a time zone PostgreSQL knows (pg_timezone_names)`]
      : [],
  );
}
