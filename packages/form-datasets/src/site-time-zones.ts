import type { PoolClient } from "pg";

/**
 * A blank zone would silently shift every `_local` column, and a zone PostgreSQL does not know
 * (not in pg_timezone_names) would fail the render with the database's own words: both block the
 * rebuild with this service's message (the blank-zone rule, docs/contract.md §10), which names the site.
 */
export async function assertSiteTimeZones(client: PoolClient, orgId: string, formId: string): Promise<void> {
  const used = await client.query<{ id: string; name: string; time_zone: string }>(
    `SELECT st.id, st.name, st.time_zone FROM sites st
      WHERE st.organization_id = $1
        AND EXISTS (SELECT 1 FROM submissions s WHERE s.organization_id = $1 AND s.form_id = $2 AND s.site_id = st.id)
      ORDER BY st.name`,
    [orgId, formId],
  );
  if (used.rowCount === 0) return;
  const zones = await knownTimeZones(client);
  const site = used.rows.find((st) => st.time_zone.trim() === "" || !zones.has(st.time_zone.toLowerCase()));
  if (!site) return;
  if (site.time_zone.trim() === "") throw new Error(`site '${site.name}' (${site.id}) has a blank time zone; set it and republish the form`);
  throw new Error(`site '${site.name}' (${site.id}) has an unknown time zone ${JSON.stringify(site.time_zone)}; set one PostgreSQL knows (pg_timezone_names) and republish the form`);
}

/**
 * PostgreSQL's zone names, lower-cased. Reading pg_timezone_names scans the zone files (tens of
 * milliseconds: most of a small form's rebuild), so the list is kept for a while per process: it
 * changes only with the server's tzdata.
 */
let zoneCache: { zones: Set<string>; until: number } | undefined;
const ZONE_CACHE_MS = 10 * 60_000;
async function knownTimeZones(client: Pick<PoolClient, "query">): Promise<Set<string>> {
  if (zoneCache && zoneCache.until > Date.now()) return zoneCache.zones;
  const { rows } = await client.query<{ name: string }>("SELECT lower(name) AS name FROM pg_timezone_names");
  zoneCache = { zones: new Set(rows.map((r) => r.name)), until: Date.now() + ZONE_CACHE_MS };
  return zoneCache.zones;
}
