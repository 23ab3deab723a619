/**
 * Parses the instants the CSV endpoint accepts into microseconds since the Unix epoch:
 * - the CSV's own form `YYYY-MM-DD HH:MM:SS[.ffffff]+00` (so `last_modified` can be sent back as received);
 * - ISO 8601 / RFC 3339: `T` or space, `Z` or a `±HH[:MM]` offset, optional seconds and fraction.
 * An offset is mandatory: a wall-clock time without one names no instant. A `+` that arrived as a
 * space (not URL-encoded) leaves no offset and is therefore rejected.
 * Digits beyond microseconds are truncated, which can only repeat a row, never skip one.
 */
const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** The accepted syntax as a JSON Schema / ECMA-262 pattern, for the OpenAPI description (range checks are parseInstantMicros's). */
export const INSTANT_PATTERN = INSTANT.source;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;

export function parseInstantMicros(text: string): bigint | undefined {
  const m = INSTANT.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (year < 1 || month < 1 || month > 12 || day < 1) return undefined;
  const monthDays = month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1];
  if (day > monthDays || hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (!m[8]) {
    const offsetHours = Number(m[10]);
    const offsetMins = m[11] === undefined ? 0 : Number(m[11]);
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, keeps years 1-99 as written.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const fractionMicros = m[7] === undefined ? 0n : BigInt(m[7].padEnd(6, "0").slice(0, 6));
  return BigInt(date.getTime()) * 1000n + fractionMicros - BigInt(offsetMinutes) * 60_000_000n;
}
