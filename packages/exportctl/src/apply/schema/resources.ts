import { z } from "zod";
import { ATTRIBUTE_RESOURCE_KINDS, ATTRIBUTE_TYPES, RESOURCES, type AttributeResourceKind, type ResourceSectionName } from "@exportsvc/datasets";
import { attributes, day, ids, lastModified, number, ref, text, uuid } from "./scalars";

/** Resource kinds that carry custom attributes, as document sections (camelCase) and as stored (snake_case). */
export const ATTRIBUTE_KINDS = Object.fromEntries(ATTRIBUTE_RESOURCE_KINDS.map((kind) => [RESOURCES[kind].section, kind])) as {
  [K in AttributeResourceKind as (typeof RESOURCES)[K]["section"]]: K;
};
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

/**
 * A resource section's record: its id, the fields of its own columns, `attributes` where the domain
 * says the kind carries custom attributes, and lastModified (in that order, the order issues are
 * reported in).
 */
function resourceRecord<S extends ResourceSectionName, F extends z.ZodRawShape>(section: S, fields: F) {
  const carried = (section in ATTRIBUTE_KINDS ? { attributes } : {}) as S extends AttributeSection ? { attributes: typeof attributes } : Record<never, never>;
  return z.strictObject({ id: uuid, ...fields, ...carried, lastModified });
}

/** The postal address fields of suppliers and customers (their tables' street1 ... country columns). */
const address = { street1: text, street2: text, city: text, region: text, zipCode: text, country: text };

export const site = z.strictObject({
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

export const team = z.strictObject({ id: uuid, name: z.string(), lastModified });

export const employee = resourceRecord("employees", {
  firstName: text,
  lastName: text,
  jobTitle: text,
  accessLevel: text,
  teams: ids,
  sites: ids,
});

export const customAttribute = z.strictObject({
  id: uuid,
  resourceKind: attributeKind,
  key: z.string().min(1),
  name: z.string(),
  type: z.enum(ATTRIBUTE_TYPES),
  position: z.number().int().optional(),
});

export const supplier = resourceRecord("suppliers", {
  name: text,
  description: text,
  websiteUrl: text,
  status: text,
  market: text,
  type: text,
  ...address,
  products: ids,
  parents: ids,
});

export const customer = resourceRecord("customers", {
  name: text,
  description: text,
  websiteUrl: text,
  phoneNumber: text,
  ...address,
  contactFirstName: text,
  contactLastName: text,
  contactEmail: text,
  contactPhone: text,
  products: ids,
});

export const productCategory = resourceRecord("productCategories", { name: text, description: text, parentId: ref });

export const PRODUCT_TYPES = { RawMaterial: 0, WorkInProgress: 1, FinishedGood: 2, Packaging: 3 } as const;
const productType = z
  .union([z.number().int(), z.enum(Object.keys(PRODUCT_TYPES) as [keyof typeof PRODUCT_TYPES])])
  .transform((v) => (typeof v === "number" ? v : PRODUCT_TYPES[v]))
  .nullable()
  .optional();

export const product = resourceRecord("products", {
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
});

export const area = resourceRecord("areas", {
  name: text,
  description: text,
  type: text,
  size: number,
  sizeUnit: text,
  parentId: ref,
  siteId: ref,
});

export const equipment = resourceRecord("equipment", {
  name: text,
  make: text,
  model: text,
  serialNumber: text,
  siteId: ref,
  areaId: ref,
});

export const chemical = resourceRecord("chemicals", {
  name: text,
  type: text,
  grade: text,
  productionMethod: text,
  sites: ids,
});

export const lot = resourceRecord("lots", {
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
});

export const recipe = resourceRecord("recipes", {
  name: text,
  description: text,
  status: text,
  outputQuantity: number,
  outputUnit: text,
  hasUnpublishedChanges: z.boolean().optional(),
  outputProductId: ref,
});

const documentVersion = z.strictObject({ id: uuid, label: z.string(), current: z.boolean().optional() });
export const document = resourceRecord("documents", {
  name: text,
  type: text,
  about: text,
  status: z.enum(["Draft", "InReview", "Published", "Rejected"]).optional(),
  archived: z.boolean().optional(),
  versions: z.array(documentVersion).optional(),
  sites: ids,
  teams: ids,
}).superRefine((d, ctx) => {
  if ((d.versions ?? []).filter((v) => v.current).length > 1) {
    ctx.addIssue({ code: "custom", path: ["versions"], message: "at most one version can be current" });
  }
});
