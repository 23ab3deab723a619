/**
 * The apply document (docs/apply-format.md): one organization's captured data, declared record by
 * record. Objects are strict so that a misspelt field is an error instead of a silently empty column.
 * The record schemas live beside this file: scalars, resources, forms, submissions (with deviations).
 */
import { z } from "zod";
import { ATTRIBUTE_TYPES, FIELD_TYPES, OTHER_RECORDS, type FieldType, type ResourceSectionName } from "@exportsvc/datasets";
import { area, chemical, customAttribute, customer, document, employee, equipment, lot, product, productCategory, recipe, site, supplier, team } from "./resources";
import { form } from "./forms";
import { ids, uuid } from "./scalars";
import { deviation, submission } from "./submissions";

export { ATTRIBUTE_TYPES, FIELD_TYPES, type FieldType };
export { day, instant, uuid } from "./scalars";
export { ATTRIBUTE_KINDS, PRODUCT_TYPES, type AttributeSection } from "./resources";
export { SELECTABLE_KINDS, type FieldInput, type FormInput } from "./forms";
export type { SubmissionInput } from "./submissions";

/**
 * The document's record sections in the order they are declared, checked and deleted (in reverse):
 * every resource kind of the domain (a kind without its record schema here does not compile), the
 * sites and teams they refer to, and the records that are not resource kinds.
 */
const SECTION_RECORDS = {
  sites: site,
  teams: team,
  employees: employee,
  customAttributes: customAttribute,
  suppliers: supplier,
  customers: customer,
  products: product,
  productCategories: productCategory,
  equipment,
  chemicals: chemical,
  areas: area,
  lots: lot,
  recipes: recipe,
  documents: document,
  forms: form,
  submissions: submission,
  deviations: deviation,
} satisfies Record<ResourceSectionName | Exclude<keyof typeof OTHER_RECORDS, "steps">, z.ZodType>;

/** Sections that can appear in `delete` (hard deletes by id): every record section. */
export type DeletableSection = keyof typeof SECTION_RECORDS;
export const DELETABLE_SECTIONS = Object.keys(SECTION_RECORDS) as DeletableSection[];

const deletions = z.strictObject(Object.fromEntries(DELETABLE_SECTIONS.map((s) => [s, ids])) as Record<DeletableSection, typeof ids>);
const sections = Object.fromEntries(Object.entries(SECTION_RECORDS).map(([s, record]) => [s, z.array(record).optional()])) as {
  [S in DeletableSection]: z.ZodOptional<z.ZodArray<(typeof SECTION_RECORDS)[S]>>;
};

export const applyDocumentSchema = z.strictObject({ organization: uuid, ...sections, delete: deletions.optional() });

/** The document as written (input to applyDocument). */
export type ApplyDocumentInput = z.input<typeof applyDocumentSchema>;
/** The validated, normalized document. */
export type ApplyDocument = z.output<typeof applyDocumentSchema>;
