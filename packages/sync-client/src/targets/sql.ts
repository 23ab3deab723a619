/** Identifier quoting shared by the SQL targets (dataset and column keys are [a-z0-9_], ≤ 63 chars). */
export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

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
