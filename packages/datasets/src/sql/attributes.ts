import type { AttributeType } from "../types";
import { textLiteral, uuidLiteral } from "./literals";
import { dateText, dateTimeText, nameList, numberText } from "./values";
import { ROW } from "./resources";

const UUID_PATTERN = "'^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'";

/** The stored values of a list-like attribute as a set of texts: an array's elements, or one scalar. */
const elementsOf = (value: string) =>
  `jsonb_array_elements_text(CASE jsonb_typeof(${value}) WHEN 'array' THEN ${value} WHEN 'null' THEN '[]'::jsonb ELSE jsonb_build_array(${value}) END)`;

/**
 * The CSV text of a custom attribute (spec: "Custom attribute type" table). Values are stored as
 * entered, in the row's `attributes` object keyed by definition id; a value that does not fit its
 * type becomes an empty cell (export_try_* give NULL) instead of failing the page.
 */
export function attributeExpression(attributeId: string, type: AttributeType | string): string {
  uuidLiteral(attributeId); // validates: only a uuid may become a JSON key here
  const value = `${ROW}.attributes -> ${textLiteral(attributeId.toLowerCase())}`;
  const text = `${ROW}.attributes ->> ${textLiteral(attributeId.toLowerCase())}`;
  switch (type) {
    case "Number":
      return numberText(`export_try_numeric(${text})`);
    case "Date":
      return dateText(`export_try_date(${text})`);
    case "DateTime":
      return dateTimeText(`export_try_timestamptz(${text})`);
    case "Document":
    case "SingleDocument":
      // Linked document ids; ids that are not uuids or whose document is gone are skipped.
      return nameList(
        "d.name",
        "d.id",
        `FROM documents d WHERE d.organization_id = ${ROW}.organization_id AND d.id IN (
          SELECT e::uuid FROM ${elementsOf(value)} AS e WHERE e ~ ${UUID_PATTERN})`,
      );
    case "MultiSelect":
      return `CASE WHEN jsonb_typeof(${value}) IN ('array', 'string') THEN (SELECT coalesce(jsonb_agg(e ORDER BY e COLLATE "C"), '[]'::jsonb)::text FROM ${elementsOf(value)} AS e) END`;
    default:
      // Select: the stored option key; every other type: the stored value as text.
      return text;
  }
}
