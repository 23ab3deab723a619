import { escapeIdentifier, escapeLiteral } from "pg";
import type { ColumnRender, FieldPart } from "./columns";
import type { DatasetPlan } from "./derive";
import type { FieldChoice, FormField } from "./fields";
import { STORED_CURSOR_COLUMN } from "@exportsvc/datasets";
import { storedCursorColumns, type StoredCursorSigning } from "./stored-cursors";

/**
 * SQL that renders a dataset's rows from `submissions`, every CSV column already as its final text
 * (docs/contract.md §5 value forms; PostgreSQL's text forms under TimeZone=UTC, DateStyle=ISO — callers run
 * it inside a transaction that pins both, see `pinTextForms`). Field ids, option keys and labels come
 * from stored form definitions, so they enter the SQL only through escapeLiteral.
 *
 * Parameters: $1 organization id, $2 form id, and with `onlySubmissions` $3 uuid[] of submission ids.
 *
 * `conversions: "optimistic"` renders the same text faster but may raise a data exception (SQLSTATE
 * class 22) on a malformed date; the caller then reruns the statement with "guarded" (the default),
 * which never raises. See `optimisticInstantText`.
 */
export interface RenderOptions {
  /** Only the submissions of $3 (uuid[]), as the maintenance loop re-renders them; else the whole form. */
  onlySubmissions: boolean;
  conversions?: Conversions;
  /** Each row's signed `_cursor` is rendered too, last (see stored-cursors.ts). */
  signing?: StoredCursorSigning;
}

/** The INSERT of rendered rows into a materialized table (parameters: organization, form[, submissions]). */
export function insertRenderedRowsSql(table: string, plan: DatasetPlan, opts: RenderOptions): string {
  return `INSERT INTO ${table} (${tableColumnNames(plan, opts.signing).join(", ")})\n${renderRowsSql(plan, opts)}`;
}

export function renderRowsSql(plan: DatasetPlan, opts: RenderOptions): string {
  // Values converted with several references (dates, instants) are extracted once per row into a
  // lateral subquery `v` (OFFSET 0 keeps the planner from copying the extraction back into every reference).
  const extracted: string[] = [];
  const ctx: RenderContext = {
    conv: opts.conversions ?? "guarded",
    once: (expr) => {
      extracted.push(expr);
      return `v.t${extracted.length}`;
    },
  };
  const depth = plan.gridPath.length;
  const submissions = `(
    SELECT s.organization_id, s.id, s.record_id, s.site_id, st.name AS site_name, st.path AS site_path, st.time_zone AS tz,
           s.status, s.is_archived, s.started_at, s.completed_at, s.last_modified, s.verifications, s."values" AS r0
      FROM submissions s
      LEFT JOIN sites st ON st.organization_id = s.organization_id AND st.id = s.site_id
     WHERE s.organization_id = $1 AND s.form_id = $2${opts.onlySubmissions ? " AND s.id = ANY($3::uuid[])" : ""}) AS x`;
  // Grid rows are expanded per submission (LATERAL), so row numbering sorts a handful of rows at a
  // time instead of the whole form: level d numbers its rows across the submission in the order of
  // the enclosing rows (docs/contract.md §7), non-object entries are skipped. The arrays are first reduced
  // to their objects (a copy only for the rare array holding anything else), so the first level's
  // numbers are the element ordinals and need no sort.
  let rows = "";
  plan.gridPath.forEach((grid, i) => {
    const d = i + 1;
    const parentRows = i === 0 ? "x.r0" : `p.r${i}`;
    const elements = `jsonb_array_elements(${objectsOf(`${parentRows} -> ${escapeLiteral(grid.id)}`)}) WITH ORDINALITY AS e(value, ord)`;
    rows =
      i === 0
        ? `SELECT e.value AS r1, e.ord AS i1 FROM ${elements}`
        : `SELECT p.*, e.value AS r${d}, row_number() OVER (ORDER BY p.i${i}, e.ord) AS i${d} FROM (${rows}) AS p CROSS JOIN LATERAL ${elements}`;
  });
  const source = depth === 0 ? "x.r0" : `g.r${depth}`;
  const select = [
    "x.organization_id",
    "x.id",
    "x.last_modified",
    "x.completed_at",
    ...(depth > 0 ? [`g.i${depth}`] : []),
    ...renderedColumns(plan).map((c) => `${columnExpression(c.render, source, depth, ctx)} AS ${escapeIdentifier(c.tableColumn)}`),
    ...(opts.signing
      ? [
          `${opts.signing.codec.sqlExpression(
            opts.signing.binding,
            { lastModified: "x.last_modified", id: "x.id", ...(depth > 0 ? { rowIndex: `g.i${depth}` } : {}) },
            opts.signing.key,
          )} AS ${STORED_CURSOR_COLUMN}`,
        ]
      : []),
  ];
  const from = depth === 0 ? submissions : `${submissions}\n CROSS JOIN LATERAL (${rows}) AS g`;
  const once = extracted.length === 0 ? "" : `\n CROSS JOIN LATERAL (SELECT ${extracted.map((e, i) => `${e} AS t${i + 1}`).join(", ")} OFFSET 0) AS v`;
  return `SELECT ${select.join(",\n       ")}\n  FROM ${from}${once}`;
}

/**
 * A grid value as an array of its object entries in order: not an array is empty, an array of
 * objects is itself (checked with one jsonpath test), anything else is rebuilt without its
 * non-object entries.
 */
function objectsOf(value: string): string {
  return `CASE WHEN jsonb_typeof(${value}) IS DISTINCT FROM 'array' THEN '[]'::jsonb
    WHEN NOT ((${value}) @? 'strict $[*] ? (@.type() != "object")') THEN ${value}
    ELSE COALESCE((SELECT jsonb_agg(o.value ORDER BY o.ord) FROM jsonb_array_elements(${value}) WITH ORDINALITY AS o(value, ord)
                    WHERE jsonb_typeof(o.value) = 'object'), '[]'::jsonb) END`;
}

/** The typed columns every materialized table starts with: position, organization, completed filter. */
const typedColumns = (plan: DatasetPlan) => ["organization_id", "id", "last_modified", "completed_at", ...(plan.gridPath.length > 0 ? ["row_index"] : [])];

/** The dataset's columns that have a text column of their own (the rest are served from a typed one). */
const renderedColumns = (plan: DatasetPlan) => {
  const typed = new Set(typedColumns(plan));
  return plan.columns.filter((c) => !typed.has(c.tableColumn));
};

/** The materialized table's column list, in the order renderRowsSql produces them. */
export function tableColumnNames(plan: DatasetPlan, signing?: StoredCursorSigning): string[] {
  return [...typedColumns(plan), ...renderedColumns(plan).map((c) => c.tableColumn), ...storedCursorColumns(signing)];
}

export function createTableSql(qualifiedName: string, plan: DatasetPlan, signing?: StoredCursorSigning): string {
  const cols = [
    "organization_id uuid NOT NULL",
    "id uuid NOT NULL",
    "last_modified timestamptz NOT NULL",
    "completed_at timestamptz",
    ...(plan.gridPath.length > 0 ? ["row_index integer NOT NULL"] : []),
    ...renderedColumns(plan).map((c) => `${escapeIdentifier(c.tableColumn)} text`),
    ...storedCursorColumns(signing).map((c) => `${c} text`),
  ];
  return `CREATE TABLE ${qualifiedName} (\n  ${cols.join(",\n  ")}\n)`;
}

/**
 * Export order (unique: a position never repeats) and the per-submission lookup of incremental
 * updates. organization_id leads both like every index of the source model (the export filters on it).
 */
export function createIndexesSql(qualifiedName: string, plan: DatasetPlan): string[] {
  const orderCols = plan.gridPath.length > 0 ? "organization_id, last_modified, id, row_index" : "organization_id, last_modified, id";
  return [`CREATE UNIQUE INDEX ON ${qualifiedName} (${orderCols})`, `CREATE INDEX ON ${qualifiedName} (organization_id, id)`];
}

const asText = (expr: string) => `(${expr})::text`;

/*
 * Tolerant conversions of stored values. The shared export_try_* helpers are plpgsql with an
 * exception block (a subtransaction per call, ~10 µs); a rebuild calls them millions of times. So a
 * strict pattern that guarantees the cast succeeds takes the plain cast, NULL stays NULL without a
 * call, and only the rare odd value (day 29-31, unusual offsets, exponents) pays for the safe helper.
 */
// Every day of every month except 29 February (leap years are left to the safe helper).
const STRICT_DATE = "[1-9][0-9]{3}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
const STRICT_INSTANT = `^${STRICT_DATE}[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,6})?)?(Z|z|[-+](0[0-9]|1[0-3])(:?[0-5][0-9])?)$`;
const STRICT_NUMBER = "^[-+]?[0-9]{1,15}(\\.[0-9]{1,15})?$";
const STRICT_UUID = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

const tolerant = (text: string, pattern: string, cast: string, fallback: string) =>
  `CASE WHEN ${text} IS NULL THEN NULL WHEN ${text} ~ '${pattern}' THEN (${text})::${cast} ELSE ${fallback}(${text}) END`;
/** timestamptz or NULL. */
export const instantOf = (text: string) => tolerant(text, STRICT_INSTANT, "timestamptz", "export_try_timestamptz");
const dateOf = (text: string) => tolerant(text, `^${STRICT_DATE}$`, "date", "export_try_date");
const numberOf = (text: string) => tolerant(text, STRICT_NUMBER, "numeric", "export_try_numeric");
const uuidOf = (text: string) => tolerant(text, STRICT_UUID, "uuid", "form_ds.try_uuid");
const boolText = (cond: string) => `CASE WHEN ${cond} THEN 't' ELSE 'f' END`;

/**
 * How stored dates and instants are converted. "guarded": the strict patterns above, never raises.
 * "optimistic": the shapes clients send nearly always are recognised with LIKE and checked by a round
 * trip instead of a regex (a PostgreSQL regex match costs ~2 µs, the round trip ~0.5 µs); a value of
 * such a shape that PostgreSQL rejects (2023-02-30, month 13) raises, and the caller reruns guarded.
 */
export type Conversions = "guarded" | "optimistic";

/**
 * The shapes of an instant taken without a regex, with the UTC text PostgreSQL prints for such a value
 * when it is canonical (`TimeZone=UTC`, `DateStyle=ISO`): the digits as given, the fraction without
 * trailing zeros. A value whose cast prints anything else (a non-digit PostgreSQL happened to accept)
 * falls through to the guarded path, so a value is converted the same either way.
 */
const INSTANT_SHAPES = [
  // 2024-03-01T10:00:00Z
  { like: "____-__-__T__:__:__Z", utcText: (t: string) => `left(${t}, 10) || ' ' || substr(${t}, 12, 8) || '+00'` },
  // 2024-03-01T10:00:00.123Z (JavaScript's toISOString)
  {
    like: "____-__-__T__:__:__.___Z",
    utcText: (t: string) => `left(${t}, 10) || ' ' || substr(${t}, 12, 8) || rtrim(rtrim(substr(${t}, 20, 4), '0'), '.') || '+00'`,
  },
];

/** An instant's UTC text (`timestamptz` output), NULL when the value is not an instant. */
function instantText(text: string, conv: Conversions): string {
  const guarded = asText(instantOf(text));
  if (conv === "guarded") return guarded;
  const fast = INSTANT_SHAPES.map(
    (s) => `WHEN ${text} LIKE '${s.like}' AND (${text}::timestamptz)::text = ${s.utcText(text)} THEN ${s.utcText(text)}`,
  );
  return `CASE WHEN ${text} IS NULL THEN NULL ${fast.join(" ")} ELSE ${guarded} END`;
}

/** An instant's local text in zone `tz` (`timestamp` output), NULL when the value is not an instant. */
function localInstantText(text: string, tz: string, conv: Conversions): string {
  const guarded = asText(`${instantOf(text)} AT TIME ZONE ${tz}`);
  if (conv === "guarded") return guarded;
  const fast = INSTANT_SHAPES.map(
    (s) => `WHEN ${text} LIKE '${s.like}' AND (${text}::timestamptz)::text = ${s.utcText(text)} THEN ((${text}::timestamptz) AT TIME ZONE ${tz})::text`,
  );
  return `CASE WHEN ${text} IS NULL THEN NULL ${fast.join(" ")} ELSE ${guarded} END`;
}

/** A date's text, NULL when the value is not a date: a canonical date prints as itself. */
function dateText(text: string, conv: Conversions): string {
  const guarded = asText(dateOf(text));
  if (conv === "guarded") return guarded;
  return `CASE WHEN ${text} IS NULL THEN NULL WHEN ${text} LIKE '____-__-__' AND (${text}::date)::text = ${text} THEN ${text} ELSE ${guarded} END`;
}

/**
 * The text of one stored value of a date-like column, as a rebuild renders it: "date" and
 * "dateTime" fields, "localDateTime" (an instant in zone `tz`, like verification columns). `text`
 * is a SQL expression of the stored text. Exposed for the equivalence test of the two conversions.
 */
export function dateLikeTextSql(kind: "date" | "dateTime" | "localDateTime", text: string, conv: Conversions, tz = "'UTC'"): string {
  if (kind === "date") return dateText(text, conv);
  return kind === "dateTime" ? instantText(text, conv) : localInstantText(text, tz, conv);
}

/** SQLSTATE class 22 (data exception): what an optimistic conversion raises on a malformed value. */
export const isDataException = (err: unknown): boolean => /^22/.test((err as { code?: string })?.code ?? "");

interface RenderContext {
  conv: Conversions;
  /** A reference to `expr` evaluated once per row. */
  once(expr: string): string;
}

function columnExpression(render: ColumnRender, source: string, depth: number, ctx: RenderContext): string {
  switch (render.kind) {
    case "rowIndex":
      return asText(`g.i${depth}`);
    case "ancestorRowIndex":
      return asText(`g.i${render.depth}`);
    case "verification":
      return localInstantText(ctx.once(`x.verifications ->> ${escapeLiteral(render.fieldId)}`), "x.tz", ctx.conv);
    case "envelope":
      switch (render.name) {
        case "id":
          return asText("x.id");
        case "record_id":
          return "x.record_id";
        case "site_id":
          return asText("x.site_id");
        case "site_name":
          return "x.site_name";
        case "site_path":
          return "x.site_path";
        case "status":
          return "x.status";
        case "is_archived":
          return boolText("x.is_archived");
        case "started_at":
        case "completed_at":
        case "last_modified":
          return asText(`x.${render.name}`);
        case "started_at_local":
        case "completed_at_local":
        case "last_modified_local":
          return asText(`x.${render.name.replace(/_local$/, "")} AT TIME ZONE x.tz`);
      }
      throw new Error(`unknown envelope column ${String((render as { name: string }).name)}`);
    case "field":
      return fieldExpression(render.field, render.part, source, ctx);
  }
}

/** A label lookup for option keys; an unknown key (option removed since) exports as stored. */
function choiceLabel(choices: FieldChoice[] | undefined, keyExpr: string): string {
  const map = Object.fromEntries((choices ?? []).map((c) => [c.key, c.label]));
  return `COALESCE(${escapeLiteral(JSON.stringify(map))}::jsonb ->> (${keyExpr}), ${keyExpr})`;
}

function fieldExpression(field: FormField, part: FieldPart, source: string, ctx: RenderContext): string {
  const v = `(${source} -> ${escapeLiteral(field.id)})`;
  const vt = `(${source} ->> ${escapeLiteral(field.id)})`;
  switch (part.kind) {
    case "option":
      // A constant one-element array (built once at plan time, not per row) to test membership.
      return `CASE WHEN jsonb_typeof(${v}) = 'array' THEN ${boolText(`${v} @> ${escapeLiteral(JSON.stringify([part.optionKey]))}::jsonb`)} END`;
    case "question":
      return choiceLabel(field.options, `${v} ->> ${escapeLiteral(part.questionKey)}`);
    case "signatureName":
      return `${v} ->> 'name'`;
    case "signatureDate":
      return instantText(ctx.once(`${v} ->> 'date'`), ctx.conv);
    case "resourceRecord":
      // The record snapshot stored with the value at capture time (docs/form-datasets.md).
      return `CASE WHEN jsonb_typeof(${v} -> 'record') = 'object' THEN (${v} -> 'record')::text END`;
    case "resourceId":
      return asText(uuidOf(`(CASE WHEN jsonb_typeof(${v}) = 'string' THEN ${vt} ELSE ${v} ->> 'id' END)`));
    case "value":
      break;
  }
  switch (field.type) {
    case "number":
      // A JSON number casts safely, and one whose text has no decimal point is already its plain
      // decimal text (jsonb keeps numbers as numeric, whose output never uses an exponent): no
      // numeric round trip for integers. A string goes through the tolerant path.
      return `CASE WHEN jsonb_typeof(${v}) = 'number' THEN CASE WHEN strpos(${vt}, '.') = 0 THEN ${vt} ELSE export_number_text((${v})::numeric) END
        ELSE export_number_text(${numberOf(vt)}) END`;
    case "yesNo":
      return `CASE WHEN jsonb_typeof(${v}) = 'boolean' THEN ${boolText(`${v} = 'true'::jsonb`)} END`;
    case "date":
      return dateText(ctx.once(vt), ctx.conv);
    case "dateTime":
      return instantText(ctx.once(vt), ctx.conv);
    case "select":
      return choiceLabel(field.options, vt);
    case "attachment":
    case "photo":
      return attachmentList(v, vt);
    default:
      return vt;
  }
}

/**
 * The elements of an attachment/photo array joined with ', ' (JSON nulls skipped, no elements: empty).
 * Arrays of up to two elements (nearly all of them) are joined inline; a correlated subquery per
 * row costs more than the rest of the row's columns together.
 */
function attachmentList(v: string, vt: string): string {
  const first = `(${v} ->> 0)`;
  const second = `(${v} ->> 1)`;
  const aggregated = `(SELECT string_agg(e.value, ', ' ORDER BY e.ord) FROM jsonb_array_elements_text(${v}) WITH ORDINALITY AS e(value, ord))`;
  return `CASE WHEN jsonb_typeof(${v}) IS DISTINCT FROM 'array' THEN ${vt}
    WHEN jsonb_array_length(${v}) = 0 THEN NULL
    WHEN jsonb_array_length(${v}) = 1 THEN ${first}
    WHEN jsonb_array_length(${v}) = 2 THEN CASE WHEN ${first} IS NULL THEN ${second} WHEN ${second} IS NULL THEN ${first} ELSE ${first} || ', ' || ${second} END
    ELSE ${aggregated} END`;
}
