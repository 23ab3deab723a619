/**
 * How a writing session declares whose data it writes, so that its open transaction holds the
 * export visibility horizon for that organization only (docs/export.md, "Declaring the writer's
 * organization"). The declaration rides on `application_name` because that is the one session
 * property every other session can read in `pg_stat_activity`; custom settings are private.
 *
 * Form: `<anything> org=<organization uuid>` at the end of `application_name` (PostgreSQL keeps at
 * most 63 bytes of it, so the prefix is shortened to fit). A session that writes for several
 * organizations, or is unsure, must not declare: an undeclared writer holds the horizon of every
 * organization, the safe default.
 */

import { isUuid, UUID_TEXT_PATTERN } from "./uuid";

/** POSIX regular expression (PostgreSQL `substring(... from ...)`) capturing the declared organization. */
export const DECLARED_ORGANIZATION_SQL_PATTERN = ` org=(${UUID_TEXT_PATTERN})$`;

const MAX_APPLICATION_NAME_BYTES = 63;

/** `application_name` of a session that writes only `organizationId`'s data: `<base> org=<uuid>`. */
export function declaredWriterApplicationName(base: string, organizationId: string): string {
  if (!isUuid(organizationId)) throw new Error(`not an organization id: ${organizationId}`);
  const suffix = ` org=${organizationId.toLowerCase()}`;
  const room = MAX_APPLICATION_NAME_BYTES - suffix.length;
  const prefix = Buffer.from(base.replace(/[^\x20-\x7e]/g, "").replace(/ org=\S*$/, ""), "ascii").subarray(0, room).toString("ascii");
  return `${prefix}${suffix}`;
}

/** Anything with a `query` method (a pg client inside a transaction). */
interface SessionQueryable {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
}

/**
 * Declares, for the rest of the current transaction only (`SET LOCAL`), that this session writes
 * `organizationId`'s data: the session's application_name gets the ` org=<uuid>` suffix. Call it
 * right after BEGIN, before the first write.
 */
export async function declareWriterOrganization(client: SessionQueryable, organizationId: string): Promise<void> {
  const { rows } = await client.query("SELECT current_setting('application_name') AS name");
  const base = (rows[0] as { name: string }).name || "writer";
  await client.query("SELECT set_config('application_name', $1, true)", [declaredWriterApplicationName(base, organizationId)]);
}
