import { z } from "zod";
import { ATTRIBUTE_RESOURCE_KINDS, ATTRIBUTE_TYPES, RESOURCES, type AttributeResourceKind } from "@exportsvc/datasets";
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

export const employee = z.strictObject({
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

export const customAttribute = z.strictObject({
  id: uuid,
  resourceKind: attributeKind,
  key: z.string().min(1),
  name: z.string(),
  type: z.enum(ATTRIBUTE_TYPES),
  position: z.number().int().optional(),
});

export const supplier = z.strictObject({
  id: uuid,
  name: text,
  description: text,
  websiteUrl: text,
  status: text,
  market: text,
  type: text,
  ...address,
  products: ids,
  parents: ids,
  attributes,
  lastModified,
});

export const customer = z.strictObject({
  id: uuid,
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
  attributes,
  lastModified,
});

export const productCategory = z.strictObject({ id: uuid, name: text, description: text, parentId: ref, attributes, lastModified });

export const PRODUCT_TYPES = { RawMaterial: 0, WorkInProgress: 1, FinishedGood: 2, Packaging: 3 } as const;
const productType = z
  .union([z.number().int(), z.enum(Object.keys(PRODUCT_TYPES) as [keyof typeof PRODUCT_TYPES])])
  .transform((v) => (typeof v === "number" ? v : PRODUCT_TYPES[v]))
  .nullable()
  .optional();

export const product = z.strictObject({
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

export const area = z.strictObject({
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

export const equipment = z.strictObject({
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

export const chemical = z.strictObject({
  id: uuid,
  name: text,
  type: text,
  grade: text,
  productionMethod: text,
  sites: ids,
  attributes,
  lastModified,
});

export const lot = z.strictObject({
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

export const recipe = z.strictObject({
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
export const document = z
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
