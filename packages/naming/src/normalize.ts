import { createHash } from "node:crypto";

/** Identifier cap of the API (dataset keys and column keys), also PostgreSQL's identifier limit. */
export const MAX_NAME_LENGTH = 63;
/** Length of the hash appended to overflowing composed names and colliding dataset names. */
export const HASH_LENGTH = 8;
/** What a name becomes when normalizing leaves nothing (e.g. a label made only of symbols). */
export const EMPTY_NAME = "unnamed";

/**
 * The naming rule (docs/contract.md §6): lowercase; spaces and dashes become underscores; other characters are removed;
 * runs of underscores collapse. Surrounding whitespace is dropped first (an accidental trailing
 * space in a form name should not end the key with `_`); an empty result becomes EMPTY_NAME.
 */
export function normalizeName(raw: string): string {
  const normalized = raw
    .trim()
    .toLowerCase()
    .replace(/[\s-]/g, "_")
    .replace(/[^a-z0-9_]/g, "")
    .replace(/_+/g, "_");
  return normalized === "" ? EMPTY_NAME : normalized;
}

/** A name taken directly from one form or field name: normalized, then truncated to the cap. */
export function directName(raw: string): string {
  return normalizeName(raw).slice(0, MAX_NAME_LENGTH);
}

/** First 8 hex characters of the SHA-256 of the text: short, stable, charset [0-9a-f]. */
export function hash8(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex").slice(0, HASH_LENGTH);
}

/**
 * Fits a name under the cap by keeping its start and appending `_<hash of the whole name>`:
 * two long names sharing their first 54 characters still end up different.
 */
export function truncateWithHash(fullName: string, hashInput: string = fullName): string {
  if (fullName.length <= MAX_NAME_LENGTH) return fullName;
  return `${fullName.slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1)}_${hash8(hashInput)}`;
}

export interface ComposedNameParts {
  prefix?: string;
  parts: string[];
  suffix?: string;
}

/**
 * A composed name: normalized parts joined with `__` (`parent__grid`, `field__option`), an optional
 * prefix and suffix joined with `_` (`verification_<field>`, `<field>_id`). Overflowing the cap, the
 * visible part is truncated and `_` + hash8 of the FULL name is appended (total exactly 63).
 */
export function composedName(input: string[] | ComposedNameParts): string {
  const { prefix, parts, suffix } = Array.isArray(input) ? { parts: input } : input;
  if (parts.length === 0) throw new Error("composedName needs at least one part");
  let full = parts.map(normalizeName).join("__");
  if (prefix !== undefined) full = `${normalizeName(prefix)}_${full}`;
  if (suffix !== undefined) full = `${full}_${normalizeName(suffix)}`;
  return truncateWithHash(full);
}

