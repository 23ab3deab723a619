/**
 * The source model's record kinds, written once: how each is called as stored (snake_case, the
 * `resources_<kind>` dataset), as a section of an apply document (camelCase), its table (the layout is
 * packages/db/migrations/001_source_model.sql), its noun in messages, and whether it carries custom
 * attributes. The SQL maps, the exportctl apply schemas and the churn generator derive from it.
 */

/** Resource kinds as stored (snake_case); each has one `resources_<kind>` dataset. */
export const RESOURCE_KINDS = [
  "suppliers",
  "customers",
  "products",
  "product_categories",
  "equipment",
  "chemicals",
  "employees",
  "areas",
  "lots",
  "recipes",
  "documents",
] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

export interface RecordKindInfo {
  /** Section of an apply document (camelCase). */
  section: string;
  table: string;
  /** Singular noun for messages ("unknown product ..."). */
  noun: string;
}

export interface ResourceInfo extends RecordKindInfo {
  /** Whether records of this kind carry custom attribute values (`attributes` jsonb). */
  attributes: boolean;
}

export const RESOURCES = {
  suppliers: { section: "suppliers", table: "suppliers", noun: "supplier", attributes: true },
  customers: { section: "customers", table: "customers", noun: "customer", attributes: true },
  products: { section: "products", table: "products", noun: "product", attributes: true },
  product_categories: { section: "productCategories", table: "product_categories", noun: "product category", attributes: true },
  equipment: { section: "equipment", table: "equipment", noun: "equipment", attributes: true },
  chemicals: { section: "chemicals", table: "chemicals", noun: "chemical", attributes: true },
  employees: { section: "employees", table: "employees", noun: "employee", attributes: true },
  areas: { section: "areas", table: "areas", noun: "area", attributes: true },
  lots: { section: "lots", table: "lots", noun: "lot", attributes: true },
  recipes: { section: "recipes", table: "recipes", noun: "recipe", attributes: true },
  documents: { section: "documents", table: "documents", noun: "document", attributes: false },
} as const satisfies Record<ResourceKind, ResourceInfo>;

/** Apply-document section of each resource kind. */
export type ResourceSectionName = (typeof RESOURCES)[ResourceKind]["section"];

/** Source records that are not resource datasets of their own but are referenced or stated in documents. */
export const OTHER_RECORDS = {
  sites: { section: "sites", table: "sites", noun: "site" },
  teams: { section: "teams", table: "teams", noun: "team" },
  customAttributes: { section: "customAttributes", table: "custom_attribute_definitions", noun: "custom attribute" },
  forms: { section: "forms", table: "forms", noun: "form" },
  submissions: { section: "submissions", table: "submissions", noun: "submission" },
  steps: { section: "steps", table: "submission_steps", noun: "submission step" },
  deviations: { section: "deviations", table: "deviations", noun: "deviation" },
} as const satisfies Record<string, RecordKindInfo>;

/** Apply-document sections whose records may refer to other records: the resource kinds, sites and teams. */
export type ReferringSection = ResourceSectionName | "sites" | "teams";

/**
 * The reference properties of each section's records (apply-document field -> section of the record it
 * names); a parent is of the record's own section. exportctl checks them, the churn generator keeps
 * them pointing at live records.
 */
export const RECORD_REFERENCES: Partial<Record<ReferringSection, Record<string, ReferringSection>>> = {
  sites: { parentId: "sites" },
  employees: { teams: "teams", sites: "sites" },
  suppliers: { products: "products", parents: "suppliers" },
  customers: { products: "products" },
  productCategories: { parentId: "productCategories" },
  products: { productCategoryId: "productCategories", sites: "sites" },
  areas: { parentId: "areas", siteId: "sites" },
  equipment: { siteId: "sites", areaId: "areas" },
  chemicals: { sites: "sites" },
  lots: { productId: "products", siteId: "sites" },
  recipes: { outputProductId: "products" },
  documents: { sites: "sites", teams: "teams" },
};

/** Resource kinds whose records carry custom attributes, keyed by apply-document section. */
export type AttributeResourceKind = { [K in ResourceKind]: (typeof RESOURCES)[K]["attributes"] extends true ? K : never }[ResourceKind];
export const ATTRIBUTE_RESOURCE_KINDS = RESOURCE_KINDS.filter((k) => RESOURCES[k].attributes) as AttributeResourceKind[];

/** Custom attribute types (how each exports: attributeDataType in definitions.ts). */
export const ATTRIBUTE_TYPES = ["Text", "Number", "Date", "DateTime", "Document", "SingleDocument", "Select", "MultiSelect", "Boolean", "Url", "Email", "Phone"] as const;
export type AttributeType = (typeof ATTRIBUTE_TYPES)[number];
