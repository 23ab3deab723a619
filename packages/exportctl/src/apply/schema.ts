import { z } from "zod";

/**
 * The apply document (docs/apply-format.md): one organization's captured data, declared record by
 * record. Objects are strict so that a misspelt field is an error instead of a silently empty column.
 */

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const uuid = z
  .string()
  .regex(UUID_PATTERN, "must be a uuid")
  .transform((v) => v.toLowerCase());

const isValidDay = (v: string) => {
  const d = new Date(`${v}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v;
};
/** A calendar day 'YYYY-MM-DD' that exists. */
export const day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date YYYY-MM-DD").refine(isValidDay, "is not a valid date");

const INSTANT_PATTERN = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|z|[-+]\d{2}(:?\d{2})?)$/;
/** An ISO 8601 instant with an offset or Z (microseconds allowed); PostgreSQL parses the text itself. */
export const instant = z
  .string()
  .regex(INSTANT_PATTERN, "must be an ISO 8601 instant with an offset, e.g. 2024-05-01T08:30:00Z")
  .refine((v) => !Number.isNaN(Date.parse(v.replace(" ", "T"))), "is not a valid instant");

const text = z.string().nullable().optional();
const number = z.number().finite().nullable().optional();
const ids = z.array(uuid).optional();
const ref = uuid.nullable().optional();
const lastModified = instant.optional();
/** Custom attribute values keyed by attribute key or id; values are stored as entered. */
const attributes = z.record(z.string(), z.unknown()).optional();

export const ATTRIBUTE_TYPES = ["Text", "Number", "Date", "DateTime", "Document", "SingleDocument", "Select", "MultiSelect", "Boolean", "Url", "Email", "Phone"] as const;

/** Resource kinds that carry custom attributes, as document sections (camelCase) and as stored (snake_case). */
export const ATTRIBUTE_KINDS = {
  suppliers: "suppliers",
  customers: "customers",
  products: "products",
  productCategories: "product_categories",
  equipment: "equipment",
  chemicals: "chemicals",
  employees: "employees",
  areas: "areas",
  lots: "lots",
  recipes: "recipes",
} as const;
export type AttributeSection = keyof typeof ATTRIBUTE_KINDS;
const storedKinds = Object.values(ATTRIBUTE_KINDS) as string[];

const attributeKind = z
  .string()
  .transform((v, ctx) => {
    const kind = (ATTRIBUTE_KINDS as Record<string, string>)[v] ?? (storedKinds.includes(v) ? v : undefined);
    if (!kind) {
      ctx.addIssue({ code: "custom", message: `must be one of ${Object.keys(ATTRIBUTE_KINDS).join(", ")}` });
      return z.NEVER;
    }
    return kind;
  });

const site = z.strictObject({
  id: uuid,
  parentId: ref,
  name: z.string(),
  timeZone: z
    .string()
    .refine((v) => v === "" || isTimeZone(v), "must be an IANA time zone name (or empty)")
    .optional(),
  lastModified,
});

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const team = z.strictObject({ id: uuid, name: z.string(), lastModified });

const employee = z.strictObject({
  id: uuid,
  firstName: text,
  lastName: text,
  jobTitle: text,
  accessLevel: text,
  teams: ids,
  sites: ids,
  attributes,
  lastModified,
});

const customAttribute = z.strictObject({
  id: uuid,
  resourceKind: attributeKind,
  key: z.string().min(1),
  name: z.string(),
  type: z.enum(ATTRIBUTE_TYPES),
  position: z.number().int().optional(),
});

const supplier = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  websiteUrl: text,
  status: text,
  market: text,
  type: text,
  street1: text,
  street2: text,
  city: text,
  region: text,
  zipCode: text,
  country: text,
  products: ids,
  parents: ids,
  attributes,
  lastModified,
});

const customer = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  websiteUrl: text,
  phoneNumber: text,
  street1: text,
  street2: text,
  city: text,
  region: text,
  zipCode: text,
  country: text,
  contactFirstName: text,
  contactLastName: text,
  contactEmail: text,
  contactPhone: text,
  products: ids,
  attributes,
  lastModified,
});

const productCategory = z.strictObject({ id: uuid, name: text, description: text, parentId: ref, attributes, lastModified });

export const PRODUCT_TYPES = { RawMaterial: 0, WorkInProgress: 1, FinishedGood: 2, Packaging: 3 } as const;
const productType = z
  .union([z.number().int(), z.enum(Object.keys(PRODUCT_TYPES) as [keyof typeof PRODUCT_TYPES])])
  .transform((v) => (typeof v === "number" ? v : PRODUCT_TYPES[v]))
  .nullable()
  .optional();

const product = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  productCode: text,
  productType,
  productCategoryId: ref,
  allergenStatus: text,
  allergens: z.array(z.string().min(1)).optional(),
  defaultShelfLifeQuantity: number,
  defaultShelfLifeUnit: text,
  sites: ids,
  attributes,
  lastModified,
});

const area = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  type: text,
  size: number,
  sizeUnit: text,
  parentId: ref,
  siteId: ref,
  attributes,
  lastModified,
});

const equipment = z.strictObject({
  id: uuid,
  name: text,
  make: text,
  model: text,
  serialNumber: text,
  siteId: ref,
  areaId: ref,
  attributes,
  lastModified,
});

const chemical = z.strictObject({
  id: uuid,
  name: text,
  type: text,
  grade: text,
  productionMethod: text,
  sites: ids,
  attributes,
  lastModified,
});

const lot = z.strictObject({
  id: uuid,
  code: text,
  description: text,
  status: text,
  quantity: number,
  unit: text,
  expiryDate: day.nullable().optional(),
  dateReceived: day.nullable().optional(),
  dateProduced: day.nullable().optional(),
  productId: ref,
  siteId: ref,
  attributes,
  lastModified,
});

const recipe = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  status: text,
  outputQuantity: number,
  outputUnit: text,
  hasUnpublishedChanges: z.boolean().optional(),
  outputProductId: ref,
  attributes,
  lastModified,
});

const documentVersion = z.strictObject({ id: uuid, label: z.string(), current: z.boolean().optional() });
const document = z
  .strictObject({
    id: uuid,
    name: text,
    type: text,
    about: text,
    status: z.enum(["Draft", "InReview", "Published", "Rejected"]).optional(),
    archived: z.boolean().optional(),
    versions: z.array(documentVersion).optional(),
    sites: ids,
    teams: ids,
    lastModified,
  })
  .superRefine((d, ctx) => {
    if ((d.versions ?? []).filter((v) => v.current).length > 1) {
      ctx.addIssue({ code: "custom", path: ["versions"], message: "at most one version can be current" });
    }
  });

export const FIELD_TYPES = [
  "text", "paragraph", "email", "phone", "time", "number", "yesNo", "date", "dateTime", "select", "checkboxGroup",
  "survey", "signature", "resourceSelect", "attachment", "photo", "grid", "heading", "instructions",
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** Resource kinds a resourceSelect field can point at. */
export const SELECTABLE_KINDS = [...Object.keys(ATTRIBUTE_KINDS), "documents", "sites", "teams"] as const;

const option = z.strictObject({ key: z.string().min(1), label: z.string() });

export interface FieldInput {
  id: string;
  key: string;
  label: string;
  type: FieldType;
  options?: { key: string; label: string }[];
  questions?: { key: string; label: string }[];
  resourceKind?: string;
  requiresVerification?: boolean;
  fields?: FieldInput[];
}

const field: z.ZodType<FieldInput> = z.lazy(() =>
  z
    .strictObject({
      id: uuid,
      key: z.string().min(1),
      label: z.string(),
      type: z.enum(FIELD_TYPES),
      options: z.array(option).optional(),
      questions: z.array(option).optional(),
      resourceKind: z.enum(SELECTABLE_KINDS).optional(),
      requiresVerification: z.boolean().optional(),
      fields: z.array(field).optional(),
    })
    .superRefine((f, ctx) => {
      const needs = (prop: "options" | "questions" | "fields" | "resourceKind", when: boolean) => {
        if (when && f[prop] === undefined) ctx.addIssue({ code: "custom", path: [prop], message: `is required for a ${f.type} field` });
        if (!when && f[prop] !== undefined) ctx.addIssue({ code: "custom", path: [prop], message: `is not allowed on a ${f.type} field` });
      };
      needs("options", ["select", "checkboxGroup", "survey"].includes(f.type));
      needs("questions", f.type === "survey");
      needs("fields", f.type === "grid");
      needs("resourceKind", f.type === "resourceSelect");
    }),
);

const form = z
  .strictObject({
    id: uuid,
    name: z.string().min(1),
    recordPrefix: z.string().min(1),
    fields: z.array(field),
    publish: z.boolean().optional(),
    deleted: z.boolean().optional(),
    lastModified,
  })
  .superRefine((f, ctx) => checkFieldTree(f.fields, ["fields"], new Set(), ctx));

function checkFieldTree(fields: FieldInput[], path: (string | number)[], ids: Set<string>, ctx: z.RefinementCtx): void {
  const keys = new Set<string>();
  fields.forEach((f, i) => {
    if (keys.has(f.key)) ctx.addIssue({ code: "custom", path: [...path, i, "key"], message: `duplicate field key '${f.key}' at this level` });
    if (ids.has(f.id)) ctx.addIssue({ code: "custom", path: [...path, i, "id"], message: `duplicate field id ${f.id} in this form` });
    keys.add(f.key);
    ids.add(f.id);
    if (f.fields) checkFieldTree(f.fields, [...path, i, "fields"], ids, ctx);
  });
}

const step = z.strictObject({
  id: uuid,
  name: z.string(),
  kind: z.enum(["Recording", "Verification"]).optional(),
  status: z.enum(["Pending", "InProgress", "Completed", "Skipped"]).optional(),
});

const submission = z.strictObject({
  id: uuid,
  formId: uuid,
  formVersion: z.number().int().min(1).optional(),
  recordId: z.string().min(1).optional(),
  siteId: ref,
  status: z.enum(["InProgress", "Completed", "Cancelled"]).optional(),
  archived: z.boolean().optional(),
  startedAt: instant.nullable().optional(),
  completedAt: instant.nullable().optional(),
  values: z.record(z.string(), z.unknown()).optional(),
  verifications: z.record(z.string(), instant).optional(),
  steps: z.array(step).optional(),
  lastModified,
});

const deviation = z
  .strictObject({
    id: uuid,
    code: z.string().regex(/^DEV-\d+$/, "must look like DEV-<number>").optional(),
    submissionId: uuid,
    stepId: ref,
    severity: z.enum(["Low", "Medium", "High", "Critical"]),
    status: z.enum(["Open", "InProgress", "Resolved"]).optional(),
    resolutionType: z.enum(["LinkedResolutionRecord", "Comment"]).nullable().optional(),
    fieldKey: text,
    fieldLabel: text,
    displayValue: text,
    rowId: text,
    assignedUserId: ref,
    assignedTeamId: ref,
    supplierId: ref,
    comment: text,
    resolutionComment: text,
    resolvedById: ref,
    resolvedAt: instant.nullable().optional(),
    signedById: ref,
    signedAt: instant.nullable().optional(),
    linkedRecordId: ref,
    linkedResolutionComment: text,
    createdAt: instant.optional(),
    lastModified,
  })
  .superRefine((d, ctx) => {
    const resolved = d.status === "Resolved";
    if (resolved && !d.resolutionType) ctx.addIssue({ code: "custom", path: ["resolutionType"], message: "is required when status is Resolved" });
    if (!resolved && d.resolutionType) ctx.addIssue({ code: "custom", path: ["resolutionType"], message: "must be empty unless status is Resolved" });
    if (!resolved && (d.resolvedAt || d.resolvedById)) ctx.addIssue({ code: "custom", path: ["resolvedAt"], message: "resolvedAt/resolvedById need status Resolved" });
    if ((d.signedAt || d.signedById) && d.resolutionType !== "Comment") {
      ctx.addIssue({ code: "custom", path: ["signedAt"], message: "a signature exists only on a deviation resolved by Comment" });
    }
    if (d.resolutionType === "LinkedResolutionRecord" && !d.linkedRecordId) {
      ctx.addIssue({ code: "custom", path: ["linkedRecordId"], message: "is required when resolutionType is LinkedResolutionRecord" });
    }
    if (d.status === "InProgress" && !d.linkedRecordId) {
      ctx.addIssue({ code: "custom", path: ["linkedRecordId"], message: "is required when status is InProgress (a linked record moves a deviation to InProgress)" });
    }
  });

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
export type FormInput = z.output<typeof form>;
export type SubmissionInput = z.output<typeof submission>;
