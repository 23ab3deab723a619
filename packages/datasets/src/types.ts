/** Column data types of the listing. The vocabulary is additive; unknown values read as text. */
export type DataType = "text" | "number" | "boolean" | "dateTime" | "localDateTime" | "date" | "uuid";

export type ResourceKind =
  | "suppliers"
  | "customers"
  | "products"
  | "product_categories"
  | "equipment"
  | "chemicals"
  | "employees"
  | "areas"
  | "lots"
  | "recipes"
  | "documents";

export type AttributeType =
  | "Text"
  | "Number"
  | "Date"
  | "DateTime"
  | "Document"
  | "SingleDocument"
  | "Select"
  | "MultiSelect"
  | "Boolean"
  | "Url"
  | "Email"
  | "Phone";

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
