import { escapeLiteral } from "pg";
import { UUID_TEXT_PATTERN } from "@exportsvc/common";
import type { AttributeType } from "../types";
import { textLiteral, uuidLiteral } from "./literals";
import { dateTimeText, nameList, numberText } from "./values";
import { ROW } from "./resources";

/** Matched with `~*` (either case), as isUuid does. */
const UUID_PATTERN = escapeLiteral(`^${UUID_TEXT_PATTERN}$`);

/**
 * Number and Date conversions inline, without the plpgsql `export_try_*` (whose EXCEPTION block
 * costs a subtransaction per call, ~3x the whole conversion): the pattern admits only text that the
 * cast accepts, so the cast can never fail. Same results as export_try_numeric / export_try_date.
 */
// ASCII classes on purpose: \d and \s may match non-ASCII digits and spaces that the casts refuse.
const NUMBER_PATTERN = String.raw`'^[ \t\n\r\f\v]*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?[ \t\n\r\f\v]*$'`;
const DATE_PATTERN = String.raw`'^([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$'`;
/** Longer digit strings could overflow numeric; no real attribute value comes near. */
const MAX_NUMBER_TEXT = 1000;

export function numberAttribute(text: string): string {
  return `CASE WHEN ${text} ~ ${NUMBER_PATTERN} THEN CASE WHEN length(${text}) <= ${MAX_NUMBER_TEXT} THEN ${numberText(text)} END END`;
}

/** A valid `YYYY-MM-DD` is already its own CSV text; the inner CASE rejects days past the month's end. */
export function dateAttribute(text: string): string {
  const year = `substr(${text}, 1, 4)::int`;
  const month = `substr(${text}, 6, 2)::int`;
  const day = `substr(${text}, 9, 2)::int`;
  const leap = `(${year} % 4 = 0 AND (${year} % 100 <> 0 OR ${year} % 400 = 0))`;
  const daysInMonth = `CASE ${month} WHEN 2 THEN CASE WHEN ${leap} THEN 29 ELSE 28 END WHEN 4 THEN 30 WHEN 6 THEN 30 WHEN 9 THEN 30 WHEN 11 THEN 30 ELSE 31 END`;
  return `CASE WHEN ${text} ~ ${DATE_PATTERN} THEN CASE WHEN ${day} <= ${daysInMonth} THEN ${text} END END`;
}

/** The stored values of a list-like attribute as a set of texts: an array's elements, or one scalar. */
const elementsOf = (value: string) =>
  `jsonb_array_elements_text(CASE jsonb_typeof(${value}) WHEN 'array' THEN ${value} WHEN 'null' THEN '[]'::jsonb ELSE jsonb_build_array(${value}) END)`;

/**
 * The CSV text of a custom attribute (docs/contract.md §8, "Custom attribute type" table). Values are stored as
 * entered, in the row's `attributes` object keyed by definition id; a value that does not fit its
 * type becomes an empty cell (export_try_* give NULL) instead of failing the page.
 */
export function attributeExpression(attributeId: string, type: AttributeType | string): string {
  uuidLiteral(attributeId); // validates: only a uuid may become a JSON key here
  const value = `${ROW}.attributes -> ${textLiteral(attributeId.toLowerCase())}`;
  const text = `${ROW}.attributes ->> ${textLiteral(attributeId.toLowerCase())}`;
  switch (type) {
    case "Number":
      return numberAttribute(text);
    case "Date":
      return dateAttribute(text);
    case "DateTime":
      return dateTimeText(`export_try_timestamptz(${text})`);
    case "Document":
    case "SingleDocument":
      // Linked document ids; ids that are not uuids or whose document is gone are skipped.
      return nameList(
        "d.name",
        "d.id",
        `FROM documents d WHERE d.organization_id = ${ROW}.organization_id AND d.id IN (
          SELECT e::uuid FROM ${elementsOf(value)} AS e WHERE e ~* ${UUID_PATTERN})`,
      );
    case "MultiSelect":
      // Only an array of option keys (strings) fits; anything else is an empty cell.
      return `CASE WHEN jsonb_typeof(${value}) = 'array' AND NOT jsonb_path_exists(${value}, 'strict $[*] ? (@.type() != "string")') THEN (SELECT coalesce(jsonb_agg(e ORDER BY e COLLATE "C"), '[]'::jsonb)::text FROM jsonb_array_elements_text(${value}) AS e) END`;
    default:
      // Select: the stored option key; every other type: the stored value as text.
      return text;
  }
}
