/**
 * The one uuid check: 8-4-4-4-12 hex digits, either case (PostgreSQL accepts both and prints lower
 * case). The braces-and-no-hyphens forms PostgreSQL also parses are refused on purpose: ids are
 * compared and quoted as text, so only the canonical form may pass.
 */

/** The uuid text as a regular-expression fragment (no anchors, lower-case hex): for patterns built on it, including PostgreSQL's. */
export const UUID_TEXT_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/** A whole value that is a uuid (case-insensitive). */
export const UUID_REGEX = new RegExp(`^${UUID_TEXT_PATTERN}$`, "i");

const LEADING_UUID = new RegExp(`^${UUID_TEXT_PATTERN}`, "i");

export const isUuid = (value: string): boolean => UUID_REGEX.test(value);

/** The uuid `text` starts with, lower-cased (e.g. the form id of a form dataset's source_ref); null when it starts with none. */
export function leadingUuid(text: string): string | null {
  const match = LEADING_UUID.exec(text);
  return match ? match[0].toLowerCase() : null;
}
