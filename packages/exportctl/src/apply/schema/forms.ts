import { z } from "zod";
import { FIELD_TYPES, type FieldType } from "@exportsvc/datasets";
import { ATTRIBUTE_KINDS } from "./resources";
import { lastModified, uuid } from "./scalars";

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

export const form = z
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

export type FormInput = z.output<typeof form>;
