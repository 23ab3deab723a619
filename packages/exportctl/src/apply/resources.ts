import type { AnyRecord } from "./references";
import type { RESOURCE_SECTIONS } from "./tables";
import type { Row } from "./upsert";

/** Column defaults for omitted fields (the table's own defaults; other columns become null). */
const COLUMN_DEFAULTS: Record<string, unknown> = { time_zone: "UTC", has_unpublished_changes: false, is_archived: false };
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** A resource record of the document as a row of its table (columns by name, relations as arrays). */
export function toRow(section: (typeof RESOURCE_SECTIONS)[number], rec: AnyRecord): Row {
  const renamed = new Map(Object.entries(section.rename ?? {}).map(([field, column]) => [column, field]));
  const row: Row = { id: rec.id };
  for (const c of section.def.columns) {
    if (c.column === "attributes") continue;
    const field = renamed.get(c.column) ?? camel(c.column);
    const value = rec[field];
    row[c.column] = value === undefined ? (section.section === "documents" && c.column === "status" ? "Draft" : (COLUMN_DEFAULTS[c.column] ?? null)) : value;
  }
  for (const rel of section.def.relations ?? []) {
    const value = rec[rel.property];
    row[rel.property] = rel.property === "versions"
      ? ((value as { id: string; label: string; current?: boolean }[] | undefined) ?? []).map((v) => ({ id: v.id, label: v.label, current: v.current ?? false }))
      : [...new Set((value as string[] | undefined) ?? [])];
  }
  return row;
}
