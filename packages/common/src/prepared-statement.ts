import { createHash } from "node:crypto";

/**
 * A statement PostgreSQL keeps prepared per connection (a named statement of the extended protocol):
 * parsed and planned once per pooled connection instead of on every call. For the small statements
 * every request runs (the registry entry, the page horizon, the listing state), planning costs several
 * times their execution (docs/export.md, "Per-request statements").
 *
 * Pass it as `db.query({ ...statement, values })`. The name carries a hash of the text, so two
 * texts never share a name (node-postgres refuses a name reused with another text on one connection).
 * Only for statements whose plan does not depend on a parameter being null (a generic plan cannot
 * drop an `$n IS NULL OR ...` branch) and whose result columns are listed, never `table.*`: a
 * migration that adds a column would otherwise fail the prepared statement ("cached plan must not
 * change result type") until the connection is replaced.
 */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

export function preparedStatement(label: string, text: string): PreparedStatement {
  if (!/^[a-z][a-z0-9-]*$/.test(label)) throw new Error(`prepared statement label '${label}' must be lower-case words joined by '-'`);
  return { name: `${label}-${createHash("sha256").update(text).digest("hex").slice(0, 12)}`, text };
}
