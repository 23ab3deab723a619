import type { FieldType } from "@exportsvc/datasets";

/** The field model stored in `form_versions.fields` (see docs/source-model.md); field types are @exportsvc/datasets' FIELD_TYPES. */
export type { FieldType };

export interface FieldChoice {
  key: string;
  label: string;
}

export interface FormField {
  id: string;
  key: string;
  label: string;
  /** A type this engine does not know exports its stored value as text (see docs/form-datasets.md). */
  type: FieldType | string;
  options?: FieldChoice[];
  questions?: FieldChoice[];
  resourceKind?: string;
  requiresVerification?: boolean;
  fields?: FormField[];
}

/** Field types that produce no column at all. */
const LAYOUT_TYPES = new Set(["heading", "instructions"]);

export const isLayoutField = (f: FormField): boolean => LAYOUT_TYPES.has(f.type);
export const isGridField = (f: FormField): boolean => f.type === "grid";

/**
 * Reads a stored field tree defensively: the tree comes from another service's writes, so entries
 * without an id or with malformed children are dropped instead of failing a whole rebuild.
 */
export function parseFieldTree(raw: unknown): FormField[] {
  if (!Array.isArray(raw)) return [];
  const out: FormField[] = [];
  for (const item of raw) {
    if (item === null || typeof item !== "object") continue;
    const f = item as Record<string, unknown>;
    if (typeof f.id !== "string" || f.id === "") continue;
    const key = typeof f.key === "string" && f.key !== "" ? f.key : f.id;
    const label = typeof f.label === "string" ? f.label : key;
    out.push({
      id: f.id,
      key,
      label,
      type: typeof f.type === "string" ? f.type : "text",
      options: parseChoices(f.options),
      questions: parseChoices(f.questions),
      resourceKind: typeof f.resourceKind === "string" ? f.resourceKind : undefined,
      requiresVerification: f.requiresVerification === true,
      fields: f.type === "grid" ? parseFieldTree(f.fields) : undefined,
    });
  }
  return out;
}

function parseChoices(raw: unknown): FieldChoice[] | undefined {
  if (!Array.isArray(raw)) return undefined;
  const out: FieldChoice[] = [];
  const seen = new Set<string>();
  for (const item of raw) {
    if (item === null || typeof item !== "object") continue;
    const c = item as Record<string, unknown>;
    if (typeof c.key !== "string" || seen.has(c.key)) continue;
    seen.add(c.key);
    out.push({ key: c.key, label: typeof c.label === "string" ? c.label : c.key });
  }
  return out;
}

/** Every field id of a tree, grids' children included. */
export function collectFieldIds(fields: FormField[], into = new Set<string>()): Set<string> {
  for (const f of fields) {
    into.add(f.id);
    if (f.fields) collectFieldIds(f.fields, into);
  }
  return into;
}

/**
 * The tree to build from: the current published tree plus fields removed since that still own
 * columns (`keepFieldIds`), taken in their newest definition from older published versions and
 * appended at the end of the container they were in. A removed field keeps its columns (docs/contract.md §6,
 * "Form datasets: naming"); a field never exported does not come back.
 */
export function mergeRetainedFields(current: FormField[], olderVersionsNewestFirst: FormField[][], keepFieldIds: ReadonlySet<string>): FormField[] {
  const merged = cloneTree(current);
  const present = collectFieldIds(merged);
  const gridsById = new Map<string, FormField>();
  const indexGrids = (fields: FormField[]) => {
    for (const f of fields) {
      if (f.fields) {
        gridsById.set(f.id, f);
        indexGrids(f.fields);
      }
    }
  };
  indexGrids(merged);

  for (const version of olderVersionsNewestFirst) {
    const visit = (fields: FormField[], containerId: string | null) => {
      for (const f of fields) {
        if (!present.has(f.id) && keepFieldIds.has(f.id)) {
          const container = containerId === null ? merged : gridsById.get(containerId)?.fields;
          if (container) {
            const copy: FormField = { ...f, fields: f.fields ? [] : undefined };
            container.push(copy);
            present.add(f.id);
            if (copy.fields) gridsById.set(copy.id, copy);
          }
        }
        if (f.fields) visit(f.fields, f.id);
      }
    };
    visit(version, null);
  }
  return merged;
}

function cloneTree(fields: FormField[]): FormField[] {
  return fields.map((f) => ({ ...f, fields: f.fields ? cloneTree(f.fields) : undefined }));
}
