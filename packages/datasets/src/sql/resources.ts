import { RESOURCE_KINDS, RESOURCES, type ResourceKind } from "../domain/resources";
import { booleanText, dateText, dateTimeText, nameList, numberText, personName } from "./values";

/**
 * Core column expressions of the resource datasets, read live from the source tables. Each
 * expression reads the page row as `r` and yields the column's final CSV text. Related records are
 * looked up by id at export time: a renamed record shows its new name, a deleted one an empty cell
 * while the id stays (no foreign keys exist on purpose, see 001_source_model.sql).
 */

export const ROW = "r";
const same = (alias: string) => `${alias}.organization_id = ${ROW}.organization_id`;

const nameOf = (table: string, idExpr: string, nameExpr = "x.name") =>
  `(SELECT ${nameExpr} FROM ${table} x WHERE x.organization_id = ${ROW}.organization_id AND x.id = ${idExpr})`;

const siteColumns = {
  site_id: `${ROW}.site_id::text`,
  site_name: nameOf("sites", `${ROW}.site_id`),
  site_path: nameOf("sites", `${ROW}.site_id`, "x.path"),
};

/** Names of the records listed in a join table, e.g. the sites of a product. */
const listVia = (join: string, ownColumn: string, otherColumn: string, table: string, nameColumn = "name") =>
  nameList(
    `x.${nameColumn}`,
    "x.id",
    `FROM ${join} j JOIN ${table} x ON x.organization_id = j.organization_id AND x.id = j.${otherColumn}
      WHERE ${same("j")} AND j.${ownColumn} = ${ROW}.id`,
  );

const PRODUCT_TYPES = `CASE ${ROW}.product_type WHEN 0 THEN 'RawMaterial' WHEN 1 THEN 'WorkInProgress' WHEN 2 THEN 'FinishedGood' WHEN 3 THEN 'Packaging' ELSE ${ROW}.product_type::text END`;

/** Columns read from the page row's column of the same name, each rendered by `render`. */
const each = (render: (column: string) => string) => (...names: string[]) => Object.fromEntries(names.map((n) => [n, render(`${ROW}.${n}`)]));
const plain = each((column) => column);
const numbers = each(numberText);
const dates = each(dateText);
const booleans = each(booleanText);
const ids = each((column) => `${column}::text`);

export const RESOURCE_TABLES = Object.fromEntries(RESOURCE_KINDS.map((kind) => [kind, RESOURCES[kind].table])) as Record<ResourceKind, string>;

/** Each kind's own columns; every kind also has id and last_modified (added below). */
const OWN_EXPRESSIONS: Record<ResourceKind, Record<string, string>> = {
  suppliers: {
    ...plain("name", "description", "website_url", "status", "market", "type", "street1", "street2", "city", "region", "zip_code", "country"),
    products: listVia("supplier_products", "supplier_id", "product_id", "products"),
    parent_names: listVia("supplier_parents", "supplier_id", "parent_supplier_id", "suppliers"),
  },
  customers: {
    ...plain("name", "description", "website_url", "phone_number", "street1", "street2", "city", "region", "zip_code", "country", "contact_email", "contact_phone"),
    contact_name: personName(`${ROW}.contact_first_name`, `${ROW}.contact_last_name`),
    products: listVia("customer_products", "customer_id", "product_id", "products"),
  },
  products: {
    ...plain("name", "description", "product_code", "allergen_status", "default_shelf_life_unit"),
    product_type: PRODUCT_TYPES,
    product_category_name: nameOf("product_categories", `${ROW}.product_category_id`),
    allergens: nameList("a.allergen", "a.allergen", `FROM product_allergens a WHERE ${same("a")} AND a.product_id = ${ROW}.id`),
    ...numbers("default_shelf_life_quantity"),
    customers: listVia("customer_products", "product_id", "customer_id", "customers"),
    sites: listVia("product_sites", "product_id", "site_id", "sites"),
    suppliers: listVia("supplier_products", "product_id", "supplier_id", "suppliers"),
  },
  product_categories: { ...plain("name", "description"), parent_name: nameOf("product_categories", `${ROW}.parent_id`) },
  equipment: { ...plain("name", "make", "model", "serial_number"), ...siteColumns, area_name: nameOf("areas", `${ROW}.area_id`) },
  chemicals: { ...plain("name", "type", "grade", "production_method"), sites: listVia("chemical_sites", "chemical_id", "site_id", "sites") },
  employees: {
    ...plain("job_title", "access_level"),
    name: personName(`${ROW}.first_name`, `${ROW}.last_name`),
    teams: listVia("employee_teams", "employee_id", "team_id", "teams"),
    sites: listVia("employee_sites", "employee_id", "site_id", "sites"),
  },
  areas: { ...plain("name", "description", "type", "size_unit"), ...numbers("size"), area_path: `${ROW}.path`, parent_name: nameOf("areas", `${ROW}.parent_id`), ...siteColumns },
  lots: {
    ...plain("code", "description", "status", "unit"),
    ...numbers("quantity"),
    ...dates("expiry_date", "date_received", "date_produced"),
    ...ids("product_id"),
    product_name: nameOf("products", `${ROW}.product_id`),
    ...siteColumns,
  },
  recipes: {
    ...plain("name", "description", "status", "output_unit"),
    ...numbers("output_quantity"),
    ...booleans("has_unpublished_changes"),
    ...ids("output_product_id"),
    output_product_name: nameOf("products", `${ROW}.output_product_id`),
  },
  documents: {
    ...plain("name", "type", "about"),
    version: `(SELECT v.version_label FROM document_versions v WHERE ${same("v")} AND v.document_id = ${ROW}.id AND v.is_current_published)`,
    ...booleans("is_archived"),
    sites: listVia("document_sites", "document_id", "site_id", "sites"),
    teams: listVia("document_teams", "document_id", "team_id", "teams"),
  },
};

const common = { id: `${ROW}.id::text`, last_modified: dateTimeText(`${ROW}.last_modified`) };

export const RESOURCE_CORE_EXPRESSIONS = Object.fromEntries(
  RESOURCE_KINDS.map((kind): [ResourceKind, Record<string, string>] => [kind, { ...common, ...OWN_EXPRESSIONS[kind] }]),
) as Record<ResourceKind, Record<string, string>>;
