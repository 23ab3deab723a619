import type { DataType } from "@exportsvc/datasets";
import { composedName, directName } from "@exportsvc/naming";
import type { FormField } from "./fields";

/** An instant's two envelope columns: as exported (dateTime), then in the site's time zone (`_local`). */
const instantColumns = <K extends string, L extends string>(key: K, label: L) =>
  [
    { key, dataType: "dateTime", label },
    { key: `${key}_local`, dataType: "localDateTime", label: `${label} (Local)` },
  ] as const;

/** The envelope every submission dataset starts with (docs/contract.md §7). */
export const SUBMISSION_ENVELOPE = [
  { key: "id", dataType: "uuid", label: "ID" },
  { key: "record_id", dataType: "text", label: "Record ID" },
  { key: "site_id", dataType: "uuid", label: "Site ID" },
  { key: "site_name", dataType: "text", label: "Site Name" },
  { key: "site_path", dataType: "text", label: "Site Path" },
  { key: "status", dataType: "text", label: "Status" },
  { key: "is_archived", dataType: "boolean", label: "Is Archived" },
  ...instantColumns("started_at", "Started At"),
  ...instantColumns("completed_at", "Completed At"),
  ...instantColumns("last_modified", "Last Modified"),
] as const satisfies readonly { key: string; dataType: DataType; label: string }[];

export type EnvelopeKey = (typeof SUBMISSION_ENVELOPE)[number]["key"];

export const GRID_ENVELOPE = [
  { key: "id", dataType: "uuid", label: "ID" },
  { key: "last_modified", dataType: "dateTime", label: "Last Modified" },
  { key: "row_index", dataType: "number", label: "Row Index" },
] as const satisfies readonly { key: string; dataType: DataType; label: string }[];

/** Names no form field can take: the envelope, `row_index` (docs/contract.md §7) and the appended `_cursor`. */
export const SUBMISSION_RESERVED = [...SUBMISSION_ENVELOPE.map((c) => c.key), "row_index", "_cursor"];
export const GRID_RESERVED = [...GRID_ENVELOPE.map((c) => c.key), "_cursor"];

/** How a column's text is produced from a submission (interpreted by render-sql.ts). */
export type ColumnRender =
  | { kind: "envelope"; name: EnvelopeKey }
  | { kind: "rowIndex" }
  /** Row index of the enclosing grid `depth` levels from the top (1 = outermost grid). */
  | { kind: "ancestorRowIndex"; depth: number }
  | { kind: "field"; field: FormField; part: FieldPart }
  | { kind: "verification"; fieldId: string };

export type FieldPart =
  | { kind: "value" }
  | { kind: "option"; optionKey: string }
  | { kind: "question"; questionKey: string }
  | { kind: "signatureName" }
  | { kind: "signatureDate" }
  | { kind: "resourceRecord" }
  | { kind: "resourceId" };

/** A field column before unique naming: stable source id (for name_assignments), candidate name. */
export interface ColumnCandidate {
  sourceId: string;
  name: string;
  dataType: DataType;
  label: string;
  render: ColumnRender;
}

/** Field types whose single column is not text. */
const WHOLE_VALUE_TYPES: Partial<Record<string, DataType>> = { number: "number", yesNo: "boolean", date: "date", dateTime: "dateTime" };

/**
 * The columns one field produces, in order (docs/contract.md §7, "Columns per field type").
 * Source ids encode the part, so a retyped field gets new columns while a relabelled one keeps its keys.
 */
export function fieldColumns(field: FormField): ColumnCandidate[] {
  const f = field;
  const key = f.key;
  const column = (sourceId: string, name: string, dataType: DataType, label: string, part: FieldPart): ColumnCandidate => ({
    sourceId,
    name,
    dataType,
    label,
    render: { kind: "field", field: f, part },
  });
  const whole = (dataType: DataType, part: FieldPart = { kind: "value" }) => column(`f:${f.id}`, directName(key), dataType, f.label, part);
  /** A column of one part of the field: `f:<id>:<partId>`, labelled `<field label> - <partLabel>`. */
  const partColumn = (partId: string, name: string, dataType: DataType, partLabel: string, part: FieldPart) =>
    column(`f:${f.id}:${partId}`, name, dataType, `${f.label} - ${partLabel}`, part);
  const suffixed = (suffix: string, dataType: DataType, partLabel: string, part: FieldPart) =>
    partColumn(suffix, composedName({ parts: [key], suffix }), dataType, partLabel, part);
  const out: ColumnCandidate[] = [];
  switch (f.type) {
    case "heading":
    case "instructions":
    case "grid":
      return [];
    case "checkboxGroup":
      for (const o of f.options ?? []) out.push(partColumn(`o:${o.key}`, composedName([key, o.key]), "boolean", o.label, { kind: "option", optionKey: o.key }));
      break;
    case "survey":
      for (const q of f.questions ?? []) out.push(partColumn(`q:${q.key}`, composedName([key, q.key]), "text", q.label, { kind: "question", questionKey: q.key }));
      break;
    case "signature":
      out.push(suffixed("name", "text", "Name", { kind: "signatureName" }), suffixed("date", "dateTime", "Date", { kind: "signatureDate" }));
      break;
    case "resourceSelect":
      out.push(whole("text", { kind: "resourceRecord" }), suffixed("id", "uuid", "ID", { kind: "resourceId" }));
      break;
    default:
      // One column of the field's whole value: text for text types, select, attachment, photo and any type this engine does not know.
      out.push(whole(WHOLE_VALUE_TYPES[f.type] ?? "text"));
  }
  if (f.requiresVerification) {
    out.push({
      sourceId: `v:${f.id}`,
      name: composedName({ prefix: "verification", parts: [key] }),
      dataType: "localDateTime",
      label: `Verification: ${f.label}`,
      render: { kind: "verification", fieldId: f.id },
    });
  }
  return out;
}
