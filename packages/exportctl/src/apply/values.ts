import { isUuid } from "@exportsvc/common";
import type { FieldInput } from "./schema";
import { isDay, isInstant } from "./schema/scalars";
import type { RefKind } from "./tables";

/**
 * Turns submission values as written in a document (keyed by field key or id, shapes per field
 * type) into the stored form (keyed by field id); see docs/source-model.md "Stored shapes".
 */
export interface ValueContext {
  problems: string[];
  /** Records a reference to check (resourceSelect ids). */
  reference(kind: RefKind, id: string, path: string): void;
  /**
   * A resourceSelect value given without `record`: the loader keeps the snapshot already stored at
   * `locator` (field ids and grid row indexes from the values root) for the same id, or takes one.
   */
  snapshot(target: { id: string; record?: unknown }, kind: RefKind, locator: (string | number)[]): void;
}

const TIME = /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$/;
const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export function findField(fields: FieldInput[], keyOrId: string): FieldInput | undefined {
  return fields.find((f) => f.key === keyOrId) ?? fields.find((f) => f.id === keyOrId.toLowerCase());
}

/** Values of one level (a submission, or one grid row) → object keyed by field id. */
export function resolveValues(
  fields: FieldInput[],
  values: Record<string, unknown>,
  path: string,
  ctx: ValueContext,
  locator: (string | number)[] = [],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values)) {
    const here = `${path}.${name}`;
    const field = findField(fields, name);
    if (!field) {
      ctx.problems.push(`${here}: the form has no field with key or id '${name}'`);
      continue;
    }
    if (field.id in out) {
      ctx.problems.push(`${here}: field '${field.key}' is given twice (by key and by id)`);
      continue;
    }
    const stored = resolveValue(field, value, here, ctx, [...locator, field.id]);
    if (stored !== undefined) out[field.id] = stored;
  }
  return out;
}

function resolveValue(field: FieldInput, value: unknown, path: string, ctx: ValueContext, locator: (string | number)[]): unknown {
  const bad = (expected: string) => {
    ctx.problems.push(`${path}: a ${field.type} value must be ${expected}, got ${JSON.stringify(value)?.slice(0, 60)}`);
    return undefined;
  };
  if (value === null) return field.type === "heading" || field.type === "instructions" ? bad("absent (the field holds no value)") : null;
  const optionKeys = (field.options ?? []).map((o) => o.key);
  switch (field.type) {
    case "text":
    case "paragraph":
    case "email":
    case "phone":
      return typeof value === "string" ? value : bad("a string");
    case "time":
      return typeof value === "string" && TIME.test(value) ? value : bad("a time HH:MM or HH:MM:SS");
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? value : bad("a number");
    case "yesNo":
      return typeof value === "boolean" ? value : bad("true or false");
    case "date":
      return isDay(value) ? value : bad("a date YYYY-MM-DD");
    case "dateTime":
      return isInstant(value) ? value : bad("an ISO 8601 instant with an offset");
    case "select":
      return typeof value === "string" && optionKeys.includes(value) ? value : bad(`one of the option keys ${optionKeys.join(", ")}`);
    case "checkboxGroup":
      return Array.isArray(value) && value.every((v) => typeof v === "string" && optionKeys.includes(v)) && new Set(value).size === value.length
        ? value
        : bad(`an array of distinct option keys (${optionKeys.join(", ")})`);
    case "survey": {
      const questionKeys = (field.questions ?? []).map((q) => q.key);
      if (!isPlainObject(value)) return bad("an object {questionKey: optionKey}");
      for (const [q, a] of Object.entries(value)) {
        if (!questionKeys.includes(q)) return bad(`an object keyed by question keys (${questionKeys.join(", ")})`);
        if (a !== null && !(typeof a === "string" && optionKeys.includes(a))) return bad(`an object whose answers are option keys (${optionKeys.join(", ")})`);
      }
      return value;
    }
    case "signature":
      if (!isPlainObject(value) || typeof value.name !== "string" || !isInstant(value.date) || Object.keys(value).length !== 2) {
        return bad("an object {name, date} with date an ISO 8601 instant");
      }
      return { name: value.name, date: value.date };
    case "resourceSelect": {
      if (!isPlainObject(value) || typeof value.id !== "string" || !isUuid(value.id) || Object.keys(value).some((k) => k !== "id" && k !== "record")) {
        return bad("an object {id, record?} with id a uuid");
      }
      if (value.record !== undefined && !isPlainObject(value.record)) return bad("an object whose record is an object");
      const stored: { id: string; record?: unknown } = { id: value.id.toLowerCase() };
      const kind = field.resourceKind as RefKind;
      if (value.record !== undefined) stored.record = value.record;
      else {
        ctx.reference(kind, stored.id, `${path}.id`);
        ctx.snapshot(stored, kind, locator);
      }
      return stored;
    }
    case "attachment":
    case "photo":
      return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : bad("an array of file names");
    case "grid":
      if (!Array.isArray(value) || !value.every(isPlainObject)) return bad("an array of row objects");
      return value.map((row, i) => resolveValues(field.fields ?? [], row as Record<string, unknown>, `${path}[${i}]`, ctx, [...locator, i]));
    case "heading":
    case "instructions":
      return bad("absent (the field holds no value)");
  }
}
