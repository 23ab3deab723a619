// The domain's enumerations, each defined once here (as a list for validators, and as its type).

/** Column data types of the listing. The vocabulary is additive; unknown values read as text. */
export const DATA_TYPES = ["text", "number", "boolean", "dateTime", "localDateTime", "date", "uuid"] as const;
export type DataType = (typeof DATA_TYPES)[number];

export { RESOURCE_KINDS, ATTRIBUTE_TYPES, type ResourceKind, type AttributeType } from "./domain/resources";
import type { AttributeType, ResourceKind } from "./domain/resources";

/** Form field types of the field model stored in `form_versions.fields` (see docs/source-model.md). */
export const FIELD_TYPES = [
  "text", "paragraph", "email", "phone", "time", "number", "yesNo", "date", "dateTime", "select", "checkboxGroup",
  "survey", "signature", "resourceSelect", "attachment", "photo", "grid", "heading", "instructions",
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** Where a column's value comes from; stored in dataset_registry.columns[].source. */
export type ColumnSource =
  /** A fixed column of a resource dataset or of `deviations`, by its key. */
  | { kind: "core"; name: string }
  /** A custom attribute value (resource datasets). */
  | { kind: "attribute"; attributeId: string; attributeType: AttributeType }
  /** Form dataset columns (materialized tables): the column of the dataset table. */
  | { kind: "table"; column: string };

export interface ColumnSpec {
  key: string;
  dataType: DataType;
  label?: string;
  source: ColumnSource;
}

export interface CoreColumn {
  key: string;
  dataType: DataType;
  label?: string;
}

export interface FixedDatasetDefinition {
  /** Dataset key, e.g. resources_suppliers or deviations. */
  key: string;
  family: "resource" | "deviations";
  resourceKind?: ResourceKind;
  /** Present on deviations only (resource datasets have none). */
  displayName?: string;
  coreColumns: CoreColumn[];
  /** Whether custom attribute columns follow the core columns. */
  hasCustomAttributes: boolean;
}
