/**
 * SQL fragments that turn typed values into their final CSV text (docs/contract.md §5), so
 * that COPY only has to quote. Sessions run with TimeZone=UTC and DateStyle=ISO (see @exportsvc/db).
 */

/** Plain decimal text: no exponent, no trailing zeros. */
export const numberText = (expr: string) => `export_number_text((${expr})::numeric)`;

/** `t` / `f` (a boolean cast to text would give `true` / `false`). */
export const booleanText = (expr: string) => `CASE WHEN (${expr}) THEN 't' WHEN NOT (${expr}) THEN 'f' END`;

/** `YYYY-MM-DD HH:MM:SS[.ffffff]+00` under TimeZone=UTC. */
export const dateTimeText = (expr: string) => `((${expr})::timestamptz)::text`;

export const dateText = (expr: string) => `((${expr})::date)::text`;

/** Wall-clock text in a site's zone; empty when the zone is blank or unknown (see 010 migration). */
export const localDateTimeText = (expr: string, zoneExpr: string) => `export_local_text(${expr}, ${zoneExpr})`;

/** `first last`, a single space when both are missing (docs/contract.md §8: contact_name, employee name). */
export const personName = (first: string, last: string) => `(coalesce(${first}, '') || ' ' || coalesce(${last}, ''))`;

/** Names joined by ', ' in a deterministic (byte-wise, then id) order; NULL (empty cell) when none. */
export const nameList = (nameExpr: string, idExpr: string, fromWhere: string) =>
  `(SELECT string_agg(${nameExpr}, ', ' ORDER BY ${nameExpr} COLLATE "C", ${idExpr}) ${fromWhere})`;
