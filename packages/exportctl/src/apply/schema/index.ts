/**
 * The apply document (docs/apply-format.md): one organization's captured data, declared record by
 * record. Objects are strict so that a misspelt field is an error instead of a silently empty column.
 * The record schemas live beside this file: scalars, resources, forms, submissions (with deviations).
 */
import { z } from "zod";
import { ATTRIBUTE_TYPES, FIELD_TYPES, type FieldType } from "@exportsvc/datasets";
import { area, chemical, customAttribute, customer, document, employee, equipment, lot, product, productCategory, recipe, site, supplier, team } from "./resources";
import { form } from "./forms";
import { ids, uuid } from "./scalars";
import { deviation, submission } from "./submissions";

export { ATTRIBUTE_TYPES, FIELD_TYPES, type FieldType };
export { day, instant, uuid } from "./scalars";
export { ATTRIBUTE_KINDS, PRODUCT_TYPES, type AttributeSection } from "./resources";
export { SELECTABLE_KINDS, type FieldInput, type FormInput } from "./forms";
export type { SubmissionInput } from "./submissions";

/** Sections that can appear in `delete` (hard deletes by id). */
export const DELETABLE_SECTIONS = [
  "sites", "teams", "employees", "customAttributes", "suppliers", "customers", "products", "productCategories",
  "equipment", "chemicals", "areas", "lots", "recipes", "documents", "forms", "submissions", "deviations",
] as const;
export type DeletableSection = (typeof DELETABLE_SECTIONS)[number];

const deletions = z.strictObject(Object.fromEntries(DELETABLE_SECTIONS.map((s) => [s, ids])) as Record<DeletableSection, typeof ids>);

export const applyDocumentSchema = z.strictObject({
  organization: uuid,
  sites: z.array(site).optional(),
  teams: z.array(team).optional(),
  employees: z.array(employee).optional(),
  customAttributes: z.array(customAttribute).optional(),
  suppliers: z.array(supplier).optional(),
  customers: z.array(customer).optional(),
  products: z.array(product).optional(),
  productCategories: z.array(productCategory).optional(),
  equipment: z.array(equipment).optional(),
  chemicals: z.array(chemical).optional(),
  areas: z.array(area).optional(),
  lots: z.array(lot).optional(),
  recipes: z.array(recipe).optional(),
  documents: z.array(document).optional(),
  forms: z.array(form).optional(),
  submissions: z.array(submission).optional(),
  deviations: z.array(deviation).optional(),
  delete: deletions.optional(),
});

/** The document as written (input to applyDocument). */
export type ApplyDocumentInput = z.input<typeof applyDocumentSchema>;
/** The validated, normalized document. */
export type ApplyDocument = z.output<typeof applyDocumentSchema>;
