import { escapeIdentifier, escapeLiteral } from "pg";
import type { ColumnRender, FieldPart } from "./columns";
import type { DatasetPlan } from "./derive";
import type { FieldChoice, FormField } from "./fields";

/**
 * SQL that renders a dataset's rows from `submissions`, every CSV column already as its final text
 * (decisions.md value forms; PostgreSQL's text forms under TimeZone=UTC, DateStyle=ISO — callers run
 * it inside a transaction that pins both, see `pinTextForms`). Field ids, option keys and labels come
 * from stored form definitions, so they enter the SQL only through escapeLiteral.
 *
 * Parameters: $1 organization id, $2 form id, and with `onlySubmissions` $3 uuid[] of submission ids.
 */
export function renderRowsSql(plan: DatasetPlan, opts: { onlySubmissions: boolean }): string {
  const depth = plan.gridPath.length;
  const ctes: string[] = [
    `l0 AS (
      SELECT s.organization_id, s.id, s.record_id, s.site_id, st.name AS site_name, st.path AS site_path, st.time_zone AS tz,
             s.status, s.is_archived, s.started_at, s.completed_at, s.last_modified, s.verifications, s."values" AS r0
        FROM submissions s
        LEFT JOIN sites st ON st.organization_id = s.organization_id AND st.id = s.site_id
       WHERE s.organization_id = $1 AND s.form_id = $2${opts.onlySubmissions ? " AND s.id = ANY($3::uuid[])" : ""})`,
  ];
  plan.gridPath.forEach((grid, i) => {
    const d = i + 1;
    const rows = `l${i}.r${i} -> ${escapeLiteral(grid.id)}`;
    // Row numbers count across the whole submission in the order of the enclosing rows (decisions.md).
    const order = i === 0 ? "e.ord" : `l${i}.i${i}, e.ord`;
    ctes.push(`l${d} AS (
      SELECT l${i}.*, e.value AS r${d}, row_number() OVER (PARTITION BY l${i}.id ORDER BY ${order}) AS i${d}
        FROM l${i}
       CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(${rows}) = 'array' THEN ${rows} ELSE '[]'::jsonb END) WITH ORDINALITY AS e(value, ord)
       WHERE jsonb_typeof(e.value) = 'object')`);
  });
  const source = `x.r${depth}`;
  const select = [
    "x.organization_id",
    "x.id",
    "x.last_modified",
    "x.completed_at",
    ...(depth > 0 ? [`x.i${depth}`] : []),
    ...plan.columns.map((c) => `${columnExpression(c.render, source, depth)} AS ${escapeIdentifier(c.tableColumn)}`),
  ];
  return `WITH ${ctes.join(",\n")}\nSELECT ${select.join(",\n       ")}\n  FROM l${depth} AS x`;
}

/** The materialized table's column list, in the order renderRowsSql produces them. */
export function tableColumnNames(plan: DatasetPlan): string[] {
  return [
    "organization_id",
    "id",
    "last_modified",
    "completed_at",
    ...(plan.gridPath.length > 0 ? ["row_index"] : []),
    ...plan.columns.map((c) => c.tableColumn),
  ];
}

export function createTableSql(qualifiedName: string, plan: DatasetPlan): string {
  const cols = [
    "organization_id uuid NOT NULL",
    "id uuid NOT NULL",
    "last_modified timestamptz NOT NULL",
    "completed_at timestamptz",
    ...(plan.gridPath.length > 0 ? ["row_index integer NOT NULL"] : []),
    ...plan.columns.map((c) => `${escapeIdentifier(c.tableColumn)} text`),
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
const boolText = (cond: string) => `CASE WHEN ${cond} THEN 't' ELSE 'f' END`;

function columnExpression(render: ColumnRender, source: string, depth: number): string {
  switch (render.kind) {
    case "rowIndex":
      return asText(`x.i${depth}`);
    case "ancestorRowIndex":
      return asText(`x.i${render.depth}`);
    case "verification":
      return asText(`export_try_timestamptz(x.verifications ->> ${escapeLiteral(render.fieldId)}) AT TIME ZONE x.tz`);
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
      return fieldExpression(render.field, render.part, source);
  }
}

/** A label lookup for option keys; an unknown key (option removed since) exports as stored. */
function choiceLabel(choices: FieldChoice[] | undefined, keyExpr: string): string {
  const map = Object.fromEntries((choices ?? []).map((c) => [c.key, c.label]));
  return `COALESCE(${escapeLiteral(JSON.stringify(map))}::jsonb ->> (${keyExpr}), ${keyExpr})`;
}

function fieldExpression(field: FormField, part: FieldPart, source: string): string {
  const v = `(${source} -> ${escapeLiteral(field.id)})`;
  const vt = `(${source} ->> ${escapeLiteral(field.id)})`;
  switch (part.kind) {
    case "option":
      return `CASE WHEN jsonb_typeof(${v}) = 'array' THEN ${boolText(`${v} @> jsonb_build_array(${escapeLiteral(part.optionKey)}::text)`)} END`;
    case "question":
      return choiceLabel(field.options, `${v} ->> ${escapeLiteral(part.questionKey)}`);
    case "signatureName":
      return `${v} ->> 'name'`;
    case "signatureDate":
      return asText(`export_try_timestamptz(${v} ->> 'date')`);
    case "resourceRecord":
      // The record snapshot stored with the value at capture time (docs/form-datasets.md).
      return `CASE WHEN jsonb_typeof(${v} -> 'record') = 'object' THEN (${v} -> 'record')::text END`;
    case "resourceId":
      return asText(`form_ds.try_uuid(CASE WHEN jsonb_typeof(${v}) = 'string' THEN ${vt} ELSE ${v} ->> 'id' END)`);
    case "value":
      break;
  }
  switch (field.type) {
    case "number":
      return `export_number_text(export_try_numeric(${vt}))`;
    case "yesNo":
      return `CASE WHEN jsonb_typeof(${v}) = 'boolean' THEN ${boolText(`${v} = 'true'::jsonb`)} END`;
    case "date":
      return asText(`export_try_date(${vt})`);
    case "dateTime":
      return asText(`export_try_timestamptz(${vt})`);
    case "select":
      return choiceLabel(field.options, vt);
    case "attachment":
    case "photo":
      return `CASE WHEN jsonb_typeof(${v}) = 'array' THEN (SELECT string_agg(e.value, ', ' ORDER BY e.ord) FROM jsonb_array_elements_text(${v}) WITH ORDINALITY AS e(value, ord)) ELSE ${vt} END`;
    default:
      return vt;
  }
}
