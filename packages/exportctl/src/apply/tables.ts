import type { PoolClient } from "pg";
import { OTHER_RECORDS, RESOURCE_KINDS, RESOURCES, type RecordKindInfo, type ResourceSectionName } from "@exportsvc/datasets";
import type { ColumnDef, Row, TableDef } from "./upsert";

/**
 * Where each document section is stored: columns in document (camelCase) and table (snake_case)
 * form, relations kept in join tables. The record kinds, their sections and tables are the domain's
 * (RESOURCES and OTHER_RECORDS in @exportsvc/datasets).
 */
export type RefKind = ResourceSectionName | keyof typeof OTHER_RECORDS;

const RECORD_OF = {
  ...Object.fromEntries(RESOURCE_KINDS.map((kind) => [RESOURCES[kind].section, RESOURCES[kind]])),
  ...OTHER_RECORDS,
} as Record<RefKind, RecordKindInfo>;

export const TABLE_OF = Object.fromEntries(Object.entries(RECORD_OF).map(([kind, info]) => [kind, info.table])) as Record<RefKind, string>;

/** Singular nouns for messages ("unknown product ..."). */
export const NOUN_OF = Object.fromEntries(Object.entries(RECORD_OF).map(([kind, info]) => [kind, info.noun])) as Record<RefKind, string>;


const plain = (column: string, type: ColumnDef["type"] = "text"): ColumnDef => ({ column, type });
const texts = (...cols: string[]) => cols.map((c) => plain(c));
const stamp: ColumnDef = { column: "last_modified", type: "timestamptz", mode: "stamp" };
const attributesCol = plain("attributes", "jsonb");
const set = (property: string, table: string, ownerColumn: string, valueColumn: string, valueType: "uuid" | "text" = "uuid") =>
  ({ kind: "set" as const, property, table, ownerColumn, valueColumn, valueType });

/** A section whose records map field-by-field onto one table (plus join tables). */
export interface ResourceSection {
  section: string;
  def: TableDef;
  /** Document field → column where the column is not the snake_case of the field name. */
  rename?: Record<string, string>;
  /** Resource kind of custom attributes, when the table has an attributes column. */
  attributeKind?: string;
}

const KIND_OF_SECTION = new Map<string, string>(RESOURCE_KINDS.map((kind) => [RESOURCES[kind].section, kind]));

/**
 * A section stored in its domain table: the given columns, then (resource kinds with custom
 * attributes) the attributes column, then last_modified.
 */
function section(name: RefKind, columns: ColumnDef[], extra: { relations?: TableDef["relations"]; rename?: Record<string, string> } = {}): ResourceSection {
  const kind = KIND_OF_SECTION.get(name);
  const attributes = kind !== undefined && RESOURCES[kind as keyof typeof RESOURCES].attributes;
  return {
    section: name,
    ...(extra.rename ? { rename: extra.rename } : {}),
    ...(attributes ? { attributeKind: kind } : {}),
    def: { table: TABLE_OF[name], columns: [...columns, ...(attributes ? [attributesCol] : []), stamp], ...(extra.relations ? { relations: extra.relations } : {}) },
  };
}

export const RESOURCE_SECTIONS: ResourceSection[] = [
  section("sites", [plain("parent_id", "uuid"), plain("name"), plain("time_zone")]),
  section("teams", [plain("name")]),
  section("employees", texts("first_name", "last_name", "job_title", "access_level"), {
    relations: [set("teams", "employee_teams", "employee_id", "team_id"), set("sites", "employee_sites", "employee_id", "site_id")],
  }),
  section("productCategories", [...texts("name", "description"), plain("parent_id", "uuid")]),
  section(
    "products",
    [
      ...texts("name", "description", "product_code"),
      plain("product_type", "integer"),
      plain("product_category_id", "uuid"),
      plain("allergen_status"),
      plain("default_shelf_life_quantity", "numeric"),
      plain("default_shelf_life_unit"),
    ],
    { relations: [set("allergens", "product_allergens", "product_id", "allergen", "text"), set("sites", "product_sites", "product_id", "site_id")] },
  ),
  section("suppliers", texts("name", "description", "website_url", "status", "market", "type", "street1", "street2", "city", "region", "zip_code", "country"), {
    relations: [set("products", "supplier_products", "supplier_id", "product_id"), set("parents", "supplier_parents", "supplier_id", "parent_supplier_id")],
  }),
  section(
    "customers",
    [
      ...texts("name", "description", "website_url", "phone_number", "street1", "street2", "city", "region", "zip_code", "country"),
      ...texts("contact_first_name", "contact_last_name", "contact_email", "contact_phone"),
    ],
    { relations: [set("products", "customer_products", "customer_id", "product_id")] },
  ),
  section("areas", [...texts("name", "description", "type"), plain("size", "numeric"), plain("size_unit"), plain("parent_id", "uuid"), plain("site_id", "uuid")]),
  section("equipment", [...texts("name", "make", "model", "serial_number"), plain("site_id", "uuid"), plain("area_id", "uuid")]),
  section("chemicals", texts("name", "type", "grade", "production_method"), { relations: [set("sites", "chemical_sites", "chemical_id", "site_id")] }),
  section("lots", [
    ...texts("code", "description", "status"),
    plain("quantity", "numeric"),
    plain("unit"),
    plain("expiry_date", "date"),
    plain("date_received", "date"),
    plain("date_produced", "date"),
    plain("product_id", "uuid"),
    plain("site_id", "uuid"),
  ]),
  section("recipes", [
    ...texts("name", "description", "status"),
    plain("output_quantity", "numeric"),
    plain("output_unit"),
    plain("has_unpublished_changes", "boolean"),
    plain("output_product_id", "uuid"),
  ]),
  section("documents", [...texts("name", "type", "about", "status"), plain("is_archived", "boolean")], {
    rename: { archived: "is_archived" },
    relations: [
      set("sites", "document_sites", "document_id", "site_id"),
      set("teams", "document_teams", "document_id", "team_id"),
      {
        kind: "list",
        property: "versions",
        unordered: true,
        table: "document_versions",
        ownerColumn: "document_id",
        storedJson: `(SELECT jsonb_agg(jsonb_build_object('id', v.id, 'label', v.version_label, 'current', v.is_current_published))
                          FROM document_versions v WHERE v.organization_id = $1 AND v.document_id = d.id)`,
        insert: insertDocumentVersions,
      },
    ],
  }),
];

async function insertDocumentVersions(client: PoolClient, organizationId: string, rows: Row[]): Promise<void> {
  const versions = rows.flatMap((r) => ((r.versions as { id: string; label: string; current: boolean }[]) ?? []).map((v) => ({ ...v, document_id: r.id })));
  if (versions.length === 0) return;
  // clock_timestamp() advances per row, so created_at keeps the document's version order.
  await client.query(
    `INSERT INTO document_versions (organization_id, id, document_id, version_label, is_current_published, created_at)
     SELECT $1, v.id, v.document_id, v.label, v.current, clock_timestamp()
       FROM jsonb_to_recordset($2::jsonb) AS v(id uuid, document_id uuid, label text, current boolean)`,
    [organizationId, JSON.stringify(versions)],
  );
}

export const SUBMISSIONS_DEF: TableDef = {
  table: "submissions",
  columns: [
    plain("form_id", "uuid"),
    plain("form_version", "integer"),
    plain("record_id"),
    plain("site_id", "uuid"),
    plain("status"),
    plain("is_archived", "boolean"),
    plain("started_at", "timestamptz"),
    plain("completed_at", "timestamptz"),
    plain("values", "jsonb"),
    plain("verifications", "jsonb"),
    stamp,
  ],
  relations: [
    {
      kind: "list",
      property: "steps",
      table: "submission_steps",
      ownerColumn: "submission_id",
      storedJson: `(SELECT jsonb_agg(jsonb_build_object('id', s.id, 'name', s.name, 'kind', s.kind, 'status', s.status) ORDER BY s.position)
                      FROM submission_steps s WHERE s.organization_id = $1 AND s.submission_id = d.id)`,
      insert: async (client, organizationId, rows) => {
        const steps = rows.flatMap((r) =>
          ((r.steps as { id: string; name: string; kind: string; status: string }[]) ?? []).map((s, position) => ({ ...s, submission_id: r.id, position })),
        );
        if (steps.length === 0) return;
        await client.query(
          `INSERT INTO submission_steps (organization_id, id, submission_id, name, kind, status, position)
           SELECT $1, s.id, s.submission_id, s.name, s.kind, s.status, s.position
             FROM jsonb_to_recordset($2::jsonb) AS s(id uuid, submission_id uuid, name text, kind text, status text, position integer)`,
          [organizationId, JSON.stringify(steps)],
        );
      },
    },
  ],
};

export const DEVIATIONS_DEF: TableDef = {
  table: "deviations",
  columns: [
    plain("code"),
    plain("submission_id", "uuid"),
    plain("step_id", "uuid"),
    plain("severity"),
    plain("status"),
    plain("resolution_type"),
    ...texts("field_key", "field_label", "display_value", "row_id"),
    plain("assigned_user_id", "uuid"),
    plain("assigned_team_id", "uuid"),
    plain("supplier_id", "uuid"),
    // The contract's standalone note (docs/contract.md §9): changing only it must not move the deviation's last_modified.
    { column: "comment", type: "text", mode: "note" },
    plain("resolution_comment"),
    plain("resolved_by_id", "uuid"),
    plain("resolved_at", "timestamptz"),
    plain("signed_by_id", "uuid"),
    plain("signed_at", "timestamptz"),
    plain("linked_record_id", "uuid"),
    plain("linked_resolution_comment"),
    { column: "created_at", type: "timestamptz", mode: "keep" },
    stamp,
  ],
};

export const CUSTOM_ATTRIBUTES_DEF: TableDef = {
  table: "custom_attribute_definitions",
  columns: [plain("resource_kind"), plain("key"), plain("name"), plain("type"), plain("position", "integer")],
};
