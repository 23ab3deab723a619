/** Identifier quoting shared by the SQL targets (dataset and column keys are [a-z0-9_], ≤ 63 chars). */
export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** The schema (SQLite: the table-name prefix `dataset_sync$`) holding the sync state beside the copies. */
export const STATE_SCHEMA = "dataset_sync";

/** A target's column type for a listing dataType; a dataType without a type of its own is stored as `fallback` (text). */
export const columnTypes = (types: Record<string, string>, fallback: string) => (dataType: string): string => types[dataType] ?? fallback;

/** Redacts a password in a database URL for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@");
  }
}
