/** Identifier quoting shared by the SQL targets (dataset and column keys are [a-z0-9_], ≤ 63 chars). */
export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** The schema (SQLite: the table-name prefix `dataset_sync$`) holding the sync state beside the copies. */
export const STATE_SCHEMA = "dataset_sync";

/** A target's column type for a listing dataType; a dataType without a type of its own is stored as `fallback` (text). */
export const columnTypes = (types: Record<string, string>, fallback: string) => (dataType: string): string => types[dataType] ?? fallback;

/**
 * The plan's columns present in a staged page's header (column `c<i>` holds the header's i-th field):
 * each column's key, its quoted name, and the typed expression `read(i, key)` reading it from the page.
 */
export function stagedColumns(plan: { columns: Record<string, string> }, header: string[], read: (position: number, key: string) => string) {
  const present = header.flatMap((key, i) => (key in plan.columns ? [{ key, value: read(i, key) }] : []));
  return { keys: present.map((c) => c.key), targets: present.map((c) => quoteIdent(c.key)), values: present.map((c) => c.value) };
}

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
