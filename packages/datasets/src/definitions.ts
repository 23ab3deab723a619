import type { AttributeType, CoreColumn, DataType, FixedDatasetDefinition, ResourceKind } from "./types";
import type { Queryable } from "./registry";
import { RESOURCES } from "./domain/resources";

const col = (key: string, dataType: DataType = "text", label?: string): CoreColumn =>
  label === undefined ? { key, dataType } : { key, dataType, label };
const typed = (dataType: DataType) => (...keys: string[]) => keys.map((k) => col(k, dataType));
const [texts, numbers, dates, uuids, booleans] = (["text", "number", "date", "uuid", "boolean"] as const).map(typed);
const name = () => col("name", "text", "Name");
const site = () => [...uuids("site_id"), ...texts("site_name", "site_path")];

/** A resource dataset: id, the given columns, last_modified; custom attribute columns where the domain says the kind carries them. */
const resource = (kind: ResourceKind, columns: CoreColumn[]): FixedDatasetDefinition => ({
  key: `resources_${kind}`,
  family: "resource",
  resourceKind: kind,
  coreColumns: [col("id", "uuid", "ID"), ...columns, col("last_modified", "dateTime", "Last Modified")],
  hasCustomAttributes: RESOURCES[kind].attributes,
});

/** The fixed datasets in listing order: eleven resource datasets, then deviations. Core columns in CSV order. */
export const FIXED_DATASETS: FixedDatasetDefinition[] = [
  resource("suppliers", [name(), ...texts("description", "website_url", "status", "market", "type", "street1", "street2", "city", "region", "zip_code", "country", "products", "parent_names")]),
  resource("customers", [
    name(),
    ...texts("description", "website_url", "phone_number", "street1", "street2", "city", "region", "zip_code", "country", "contact_name", "contact_email", "contact_phone", "products"),
  ]),
  resource("products", [
    name(),
    ...texts("description", "product_code", "product_type", "product_category_name", "allergen_status", "allergens"),
    ...numbers("default_shelf_life_quantity"),
    ...texts("default_shelf_life_unit", "customers", "sites", "suppliers"),
  ]),
  resource("product_categories", [name(), ...texts("description", "parent_name")]),
  resource("equipment", [name(), ...texts("make", "model", "serial_number", "site_name"), ...uuids("site_id"), ...texts("site_path", "area_name")]),
  resource("chemicals", [name(), ...texts("type", "grade", "production_method", "sites")]),
  resource("employees", [name(), ...texts("job_title", "access_level", "teams", "sites")]),
  resource("areas", [name(), ...texts("description", "type"), ...numbers("size"), ...texts("size_unit", "area_path", "parent_name"), ...site()]),
  resource("lots", [
    col("code", "text", "Code"),
    ...texts("description", "status"),
    ...numbers("quantity"),
    ...texts("unit"),
    ...dates("expiry_date", "date_received", "date_produced"),
    ...uuids("product_id"),
    ...texts("product_name"),
    ...site(),
  ]),
  resource("recipes", [name(), ...texts("description", "status"), ...numbers("output_quantity"), ...texts("output_unit"), ...booleans("has_unpublished_changes"), ...uuids("output_product_id"), ...texts("output_product_name")]),
  resource("documents", [name(), ...texts("type", "about", "version"), ...booleans("is_archived"), ...texts("sites", "teams")]),
  {
    key: "deviations",
    family: "deviations",
    displayName: "Deviations",
    hasCustomAttributes: false,
    coreColumns: [
      col("id", "uuid", "ID"),
      col("code", "text", "Code"),
      col("severity", "text", "Severity"),
      col("status", "text", "Status"),
      col("is_resolved", "boolean", "Resolved"),
      col("resolution_type", "text", "Resolution Type"),
      col("field_key", "text", "Field Key"),
      col("field_label", "text", "Field Label"),
      col("display_value", "text", "Value"),
      col("row_id", "text", "Row ID"),
      col("workflow_name", "text", "Workflow Name"),
      col("form_name", "text", "Form Name"),
      col("submission_id", "uuid", "Submission ID"),
      col("record_id", "text", "Record ID"),
      col("submission_status", "text", "Submission Status"),
      col("is_archived", "boolean", "Archived"),
      col("step_name", "text", "Step Name"),
      col("step_status", "text", "Step Status"),
      col("site_name", "text", "Site Name"),
      col("site_id", "uuid", "Site ID"),
      col("site_path", "text", "Site Path"),
      col("assigned_to", "text", "Assigned To"),
      col("assigned_user_name", "text", "Assigned User"),
      col("assigned_team_name", "text", "Assigned Team"),
      col("supplier_name", "text", "Supplier"),
      col("comment", "text", "Comment"),
      col("resolution_comment", "text", "Resolution Comment"),
      col("resolved_by", "text", "Resolved By"),
      col("resolved_at", "dateTime", "Resolved At"),
      col("resolved_at_local", "localDateTime", "Resolved At (Local)"),
      col("signed_by", "text", "Signed By"),
      col("signed_at", "dateTime", "Signed At"),
      col("signed_at_local", "localDateTime", "Signed At (Local)"),
      col("linked_record_code", "text", "Linked Record Code"),
      col("linked_record_status", "text", "Linked Record Status"),
      col("linked_record_source", "text", "Linked Record Source"),
      col("linked_resolution_comment", "text", "Linked Resolution Comment"),
      col("created_at", "dateTime", "Created At"),
      col("created_at_local", "localDateTime", "Created At (Local)"),
      col("last_modified", "dateTime", "Last Modified"),
      col("last_modified_local", "localDateTime", "Last Modified (Local)"),
    ],
  },
];

export const FIXED_DATASETS_BY_KEY: ReadonlyMap<string, FixedDatasetDefinition> = new Map(FIXED_DATASETS.map((d) => [d.key, d]));

/** A fixed dataset's registry kind and source (`dataset_registry.kind`, `source_ref`): a resource's kind of record, or deviations. */
export const fixedDatasetSource = (d: FixedDatasetDefinition): { kind: "resource" | "deviations"; sourceRef: string } =>
  d.family === "resource" ? { kind: "resource", sourceRef: d.resourceKind! } : { kind: "deviations", sourceRef: d.key };

/** Column type of a custom attribute (docs/contract.md §8, "Custom attribute type" table). */
export function attributeDataType(type: AttributeType | string): DataType {
  switch (type) {
    case "Number":
      return "number";
    case "Date":
      return "date";
    case "DateTime":
      return "dateTime";
    default:
      return "text";
  }
}

/** Names a custom attribute column can never take on a resource dataset (besides the core columns). */
export const RESERVED_RESOURCE_COLUMNS = ["id", "last_modified", "row_index", "row_seq", "_cursor"];

/** The appended paging column, last in every dataset. */
export const CURSOR_COLUMN = { key: "_cursor", dataType: "text" as DataType };

/** A custom attribute definition of an organization, as the fixed datasets' columns are built from it. */
export interface OrganizationAttribute {
  id: string;
  resource_kind: string;
  key: string;
  name: string;
  type: AttributeType;
}

/** The organization's custom attribute definitions in column order (resource kind, position, creation). */
export async function loadOrganizationAttributes(db: Queryable, organizationId: string): Promise<OrganizationAttribute[]> {
  const { rows } = await db.query<OrganizationAttribute>(
    `SELECT id, resource_kind, key, name, type FROM custom_attribute_definitions
        WHERE organization_id = $1 ORDER BY resource_kind, position, created_at, id`,
    [organizationId],
  );
  return rows;
}
