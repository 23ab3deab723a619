import { isDeepStrictEqual } from "node:util";
import type { CursorCodec, CursorKey } from "../cursor";
import { preparedStatement } from "@exportsvc/common";
import type { Queryable } from "../registry";
import type { ColumnSpec } from "../types";
import { identifier, integerLiteral, tableIdentifier, textLiteral, timestamptzLiteral, uuidLiteral } from "./literals";
import { buildPageQuery, headerFields, rowsBinding, sourceOf, type PageDataset, type PageRequest } from "./page-query";
import { ROW } from "./resources";
import { REWRITE_REFERENCES, rewriteFeed } from "./rewrites-query";

/*
 * Rendered datasets (migration 130, docs/export.md "Rendered datasets"): a resource dataset's or
 * deviations' rows rendered once into a table of the organization's schema, column `line` holding
 * each row's CSV record up to its `_cursor`, with the signed `_cursor` stored. The schema
 * service writes them (services/schema/src/maintenance/rendered-datasets.ts); a page reads them only
 * while its own statement finds nothing they were rendered from changed (renderedPageStatement).
 */

/**
 * The rendering code's version: a page or a render by code of another version does not trust the
 * table (a deploy that changes how a column renders re-renders every table).
 */
export const RENDER_VERSION = 1;

/** Datasets rendered into tables: the ones read live from the source tables. */
export const isRenderedKind = (dataset: Pick<PageDataset, "kind">): boolean => dataset.kind === "resource" || dataset.kind === "deviations";

/**
 * A text column as PostgreSQL's `COPY ... (FORMAT csv)` writes it in a record of several fields: NULL
 * as nothing, the empty string and any value holding a comma, a double quote, CR or LF in double
 * quotes (quotes doubled), anything else as is (docs/contract.md §5). `column` is read several times:
 * a column reference, never an expression to compute.
 */
export const csvFieldSql = (column: string): string =>
  `CASE WHEN ${column} IS NULL THEN '' WHEN ${column} = '' OR ${column} ~ '[,"\r\n]' THEN '"' || replace(${column}, '"', '""') || '"' ELSE ${column} END`;

/** The CSV record of these text columns (csvFieldSql each, comma-separated), without its line end. */
export const csvRecordSql = (columns: readonly string[]): string => columns.map(csvFieldSql).join(" || ',' || ");

/**
 * How a page of a rendered table is COPYed: one text column, the CSV record, which `FORMAT text`
 * writes as is but for backslash escapes (CopyTextUnescaper undoes them).
 */
export const RENDERED_PAGE_COPY_FORMAT = "text" as const;

/** The rewrite log's kinds whose entries can change what this dataset's rows show (REWRITE_REFERENCES). */
export function rewriteKindsOf(dataset: Pick<PageDataset, "kind" | "sourceRef">): string[] {
  return [...new Set((REWRITE_REFERENCES[rewriteFeed(dataset)] ?? []).map((r) => r.kind))].sort();
}

/** A dataset's row of rendered_datasets. */
export interface RenderedState {
  organizationId: string;
  dataset: string;
  /** NULL: not rendered (the dataset held too few rows to be worth it): pages read it live. */
  tableName: string | null;
  columns: ColumnSpec[];
  renderVersion: number;
  sourceVersion: string;
  organizationRewrites: string;
  datasetRewrites: string;
  /** µs since the Unix epoch, as text (bigint). */
  rewritesFromMicros: string;
  rewriteEntries: string;
  cursorSignature: string | null;
  renderedAt: Date;
  renderMs: number;
}

const STATE_COLUMNS = `s.organization_id::text AS "organizationId", s.dataset, s.table_name AS "tableName", s.columns,
  s.render_version AS "renderVersion", s.source_version::text AS "sourceVersion", s.organization_rewrites::text AS "organizationRewrites",
  s.dataset_rewrites::text AS "datasetRewrites", (extract(epoch FROM s.rewrites_from) * 1000000)::bigint::text AS "rewritesFromMicros",
  s.rewrite_entries::text AS "rewriteEntries", s.cursor_signature AS "cursorSignature", s.rendered_at AS "renderedAt", s.render_ms AS "renderMs"`;

/** The dataset's rendered table, if any, for the schema service (locked for its render). */
export async function loadRenderedState(db: Queryable, organizationId: string, dataset: string, opts: { forUpdate?: boolean } = {}): Promise<RenderedState | undefined> {
  const { rows } = await db.query<RenderedState>(
    `SELECT ${STATE_COLUMNS} FROM rendered_datasets s WHERE s.organization_id = $1 AND s.dataset = $2${opts.forUpdate ? " FOR UPDATE" : ""}`,
    [organizationId, dataset],
  );
  return rows[0];
}

/** A page's view of its dataset's rendered table: the state, and whether the table was current when read. */
export interface RenderedPlan {
  state: RenderedState;
  /** The table is the dataset (currentConditionsOf). */
  current: boolean;
  /** The table holds every row it has as a live read renders it; pages render only the rows it lacks (patchableConditionsOf). */
  patchable: boolean;
}

const PLAN_INPUTS = renderInputs({ organization: "$1::uuid", dataset: "$2::text", kinds: "$3::text[]", rewritesFrom: "s.rewrites_from" });
// Every resource and deviations page runs it: prepared, as the registry entry is ($3: the dataset's rewrite kinds).
const SELECT_RENDERED_PLAN = preparedStatement(
  "rendered-plan",
  `SELECT ${STATE_COLUMNS}, ${currentConditionsOf(PLAN_INPUTS)} AS current, ${patchableConditionsOf(PLAN_INPUTS)} AS patchable
     FROM rendered_datasets s WHERE s.organization_id = $1::uuid AND s.dataset = $2::text`,
);

/**
 * The dataset's rendered table, with whether it is current or patchable in the caller's snapshot
 * (current: neither the dataset's own rows, dataset_changes, nor the records its rows show changed
 * since the render; patchable: only its own rows did); undefined: none.
 */
export async function loadRenderedPlan(db: Queryable, organizationId: string, dataset: Pick<PageDataset, "key" | "kind" | "sourceRef">): Promise<RenderedPlan | undefined> {
  const { rows } = await db.query<RenderedState & { current: boolean; patchable: boolean }>({ ...SELECT_RENDERED_PLAN, values: [organizationId, dataset.key, rewriteKindsOf(dataset)] });
  if (!rows[0]) return undefined;
  const { current, patchable, ...state } = rows[0];
  return { state, current, patchable };
}

/** Whether a page of `dataset` (as the registry has it now) may be read from the rendered table `state`. */
export function servesRendered(dataset: PageDataset, state: RenderedState | undefined): state is RenderedState & { tableName: string } {
  return state !== undefined && state.tableName !== null && state.renderVersion === RENDER_VERSION && isDeepStrictEqual(state.columns, dataset.columns);
}

/** The SQL expressions renderInputs reads: the organization, the dataset key, its rewrite kinds (text[]) and the entries' lower bound. */
export interface RenderInputsScope {
  organization: string;
  dataset: string;
  kinds: string;
  rewritesFrom: string;
}

/**
 * What rendered rows are rendered from, now, as SQL scalars of one statement: the source's change
 * counter, the two rewrite counters, the rewrite entries of the dataset's kinds stamped at or after
 * `rewritesFrom`, and whether entries of those kinds were pruned from then on (which could hide one).
 */
export function renderInputs({ organization: o, dataset: k, kinds, rewritesFrom: from }: RenderInputsScope) {
  return {
    sourceVersion: `COALESCE((SELECT d.version FROM dataset_changes d WHERE d.organization_id = ${o} AND d.dataset = ${k}), 0)`,
    organizationRewrites: `COALESCE((SELECT w.version FROM dataset_rewrites w WHERE w.organization_id = ${o}), 0)`,
    datasetRewrites: `COALESCE((SELECT w.version FROM dataset_rewrite_counters w WHERE w.organization_id = ${o} AND w.dataset = ${k}), 0)`,
    rewriteEntries: `(SELECT count(*) FROM dataset_rewrite_log l WHERE l.organization_id = ${o} AND l.kind = ANY(${kinds}) AND l.rewritten_at >= ${from})`,
    prunedSince: `EXISTS (SELECT 1 FROM dataset_rewrite_watermarks m WHERE m.organization_id = ${o} AND m.kind = ANY(${kinds}) AND m.pruned_through_at >= ${from})`,
  };
}

/** renderInputs of one dataset of one organization (literals). */
export function renderInputsSql(organizationId: string, dataset: Pick<PageDataset, "key" | "kind" | "sourceRef">, rewritesFrom: string) {
  const kinds = `ARRAY[${rewriteKindsOf(dataset).map(textLiteral).join(", ")}]::text[]`;
  return renderInputs({ organization: uuidLiteral(organizationId), dataset: textLiteral(dataset.key), kinds, rewritesFrom });
}

/**
 * SQL boolean on the rendered_datasets row `s`: its table holds, as a live read renders them now,
 * every row whose (id, last_modified) it has: nothing a row shows of other records changed since
 * the render (the rewrite counters and log), and the table was rendered by this code. A row's own
 * change moves its last_modified (docs/source-model.md), so only the rows it lacks are behind.
 */
function patchableConditionsOf(inputs: ReturnType<typeof renderInputs>): string {
  return `(s.table_name IS NOT NULL AND s.render_version = ${integerLiteral(RENDER_VERSION)}
      AND s.organization_rewrites = ${inputs.organizationRewrites}
      AND s.dataset_rewrites = ${inputs.datasetRewrites}
      AND s.rewrite_entries = ${inputs.rewriteEntries}
      AND NOT ${inputs.prunedSince})`;
}

/** SQL boolean on the rendered_datasets row `s`: patchable, and the dataset's own rows unchanged since (the table is the dataset). */
function currentConditionsOf(inputs: ReturnType<typeof renderInputs>): string {
  return `(${patchableConditionsOf(inputs)} AND s.source_version = ${inputs.sourceVersion})`;
}

/** The (last_modified, id) keyset and visibility conditions of a page, on the rows `alias`. */
function positionConditions(alias: string, request: PageRequest): string[] {
  const where = [`${alias}.organization_id = ${uuidLiteral(request.organizationId)}`];
  if (request.after) where.push(`(${alias}.last_modified, ${alias}.id) > (${timestamptzLiteral(request.after.lastModifiedMicros)}, ${uuidLiteral(request.after.id)})`);
  if (request.visibleBeforeMicros !== undefined) where.push(`${alias}.last_modified < ${timestamptzLiteral(request.visibleBeforeMicros)}`);
  return where;
}

/**
 * The page of a rendered dataset, for the state read in the page's own snapshot (renderedPageStatement):
 * - "table" (the state is current): a keyset walk of the table's (organization_id, last_modified,
 *   id) index, nothing computed but stored text;
 * - "patched" (patchable, not current: the dataset's rows were written since the render): the page's
 *   positions are read from the source's own keyset index and merged, in that order, with the
 *   table's (a merge join on (last_modified, id), no look-up per row); a row the table holds at that
 *   (id, last_modified) takes its record from it, one it lacks (new or changed since) is rendered by
 *   the live page query for its id alone. The table's side reads at most twice the page's rows: where
 *   more of its rows in the window are stale, the rest are rendered live, never served behind. A
 *   dataset under constant writes is read at nearly the table's speed.
 * Either is exact only in a snapshot in which the state is as `state` and `shape` say: the statement
 * checks that first, in its own snapshot, and fails before its first row otherwise
 * (renderedPageGuard); it takes the same position, limit and visibility horizon as the live page
 * query and gives the bytes it gives.
 */
export function buildRenderedPageQuery(
  dataset: PageDataset,
  state: RenderedState & { tableName: string },
  request: PageRequest,
  codec: CursorCodec,
  shape: RenderedPageShape,
): string {
  if (!Number.isInteger(request.limit) || request.limit < 1) throw new RangeError("limit must be a positive integer");
  const guard = renderedPageGuard(dataset, state, request.organizationId, shape);
  const binding = rowsBinding(request.organizationId, dataset);
  const stored = codec.keyForStoredSignature(state.cursorSignature, binding) !== undefined;
  const cursorOf = (alias: string) => {
    const computed = codec.sqlExpression(binding, { lastModified: `${alias}.last_modified`, id: `${alias}.id` });
    return stored ? `COALESCE(${alias}.signed_cursor, ${computed})` : computed;
  };
  const table = tableIdentifier(state.tableName);
  const limit = integerLiteral(request.limit);
  const label = `/* export ${dataset.key.replace(/[^A-Za-z0-9_]/g, "_")} org=${request.organizationId.toLowerCase()} rendered ${shape} */`;
  if (shape === "table") {
    return `${label}
SELECT c.line || ',' || ${cursorOf("c")} AS record
  FROM ${table} c
  WHERE ${[...positionConditions("c", request), guard].join(" AND ")}
  ORDER BY c.last_modified, c.id
  LIMIT ${limit}`;
  }
  // The live records are built the same way from the live page's columns (each already its final text).
  const liveRecord = csvRecordSql(headerFields(dataset).map((key) => `live.${identifier(key)}::text`));
  const source = sourceOf(dataset, request.organizationId, "join").table;
  // Per page row the table lacks, the live page query for that one row (a subquery CASE runs only for those).
  const patched = buildPageQuery(dataset, { ...request, limit: 1, onlyIds: "SELECT p.id" }, codec);
  return `${label}
SELECT CASE WHEN p.rendered THEN p.line || ',' || ${cursorOf("p")} ELSE (SELECT ${liveRecord} FROM (${patched}) live) END AS record
  FROM (SELECT t.id, t.last_modified, c.id IS NOT NULL AS rendered, c.line, c.signed_cursor
          FROM (SELECT t.id, t.last_modified FROM ${source} t
                 WHERE ${positionConditions("t", request).join(" AND ")}
                 ORDER BY t.last_modified, t.id
                 LIMIT ${limit}) t
          LEFT JOIN (SELECT c.id, c.last_modified, c.line, c.signed_cursor FROM ${table} c
                      WHERE ${positionConditions("c", request).join(" AND ")}
                      ORDER BY c.last_modified, c.id
                      LIMIT ${integerLiteral(2 * request.limit)}) c ON c.last_modified = t.last_modified AND c.id = t.id
         ORDER BY t.last_modified, t.id) p
  WHERE ${guard}
  ORDER BY p.last_modified, p.id`;
}

/**
 * SQLSTATE of a rendered page whose plan no longer held in its statement's snapshot (the guard of
 * migration 135): it failed before its first row, and is planned again (renderedPageStatement).
 */
export const RENDERED_PLAN_STALE_SQLSTATE = "XR001";

/** Whether `err` is PostgreSQL refusing a rendered page planned on a state that moved (RENDERED_PLAN_STALE_SQLSTATE). */
export const isRenderedPlanStale = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === RENDERED_PLAN_STALE_SQLSTATE;

/**
 * The condition that makes a rendered page exact: in the statement's own snapshot, the dataset's
 * rendered_datasets row still names the table the page reads, and that table is still current
 * ("table") or patchable ("patched"): the conditions loadRenderedPlan read, evaluated once
 * (rendered_page_guard, a one-time filter) before the first row; false fails the statement.
 */
function renderedPageGuard(dataset: PageDataset, state: RenderedState & { tableName: string }, organizationId: string, shape: RenderedPageShape): string {
  const inputs = renderInputsSql(organizationId, dataset, "s.rewrites_from");
  const holds = shape === "table" ? currentConditionsOf(inputs) : patchableConditionsOf(inputs);
  return `rendered_page_guard(EXISTS (SELECT FROM rendered_datasets s
    WHERE s.organization_id = ${uuidLiteral(organizationId)} AND s.dataset = ${textLiteral(dataset.key)} AND s.table_name = ${textLiteral(state.tableName)}
      AND ${holds}))`;
}

/**
 * How a page of a rendered dataset is read (renderedPageStatement): from its current table, from the
 * table with the rows written since its render rendered live (patched), or live.
 */
export const RENDERED_PAGE_SOURCES = ["table", "patched", "live"] as const;
export type RenderedPageSource = (typeof RENDERED_PAGE_SOURCES)[number];

/** Which rendered read a page's statement is (buildRenderedPageQuery). */
export type RenderedPageShape = Exclude<RenderedPageSource, "live">;

/** A page's statement and how it is COPYed. */
export interface PageStatement {
  select: string;
  /**
   * "csv": the SELECT's columns are the record's fields. "text": the SELECT has one column, each
   * row's CSV record already (a rendered dataset's page), COPYed as text and unescaped.
   */
  format: "csv" | "text";
}

/**
 * A rendered dataset's page statement for the plan loadRenderedPlan read just before (undefined:
 * none): from the table while the plan says current, patched while it says patchable, else live.
 * The table's and the patched statement carry the plan's guard (renderedPageGuard): in their own
 * snapshot they fail with RENDERED_PLAN_STALE_SQLSTATE, before any row, when it no longer holds, and
 * the caller plans the page again. One branch a statement: planning the three together (each guarded
 * by the state read in the statement) cost 5–6 ms a page.
 */
export function renderedPageStatement(
  plan: RenderedPlan | undefined,
  dataset: PageDataset,
  request: PageRequest,
  codec: CursorCodec,
): PageStatement & { source: RenderedPageSource } {
  if (plan?.patchable && servesRendered(dataset, plan.state)) {
    const shape: RenderedPageShape = plan.current ? "table" : "patched";
    return { select: buildRenderedPageQuery(dataset, plan.state, request, codec, shape), format: RENDERED_PAGE_COPY_FORMAT, source: shape };
  }
  return { select: buildPageQuery(dataset, request, codec), format: "csv", source: "live" };
}

/**
 * The rendered rows of the organization's dataset, as a SELECT yielding (organization_id, id,
 * last_modified, line, signed_cursor), `line` the row's CSV record up to its `_cursor` (csvRecordSql
 * of the live page's column expressions), optionally only the rows `filter` (an SQL condition on the
 * source row `r`) keeps. `signing`: the key the stored cursors are signed with (none: NULL).
 */
export function renderRowsSelect(dataset: PageDataset, organizationId: string, codec: CursorCodec | undefined, signing: CursorKey | undefined, filter?: string): string {
  const source = sourceOf(dataset, organizationId, "join");
  const cursor = codec && signing ? codec.sqlExpression(rowsBinding(organizationId, dataset), { lastModified: `${ROW}.last_modified`, id: `${ROW}.id` }, signing) : "NULL::text";
  // Each column computed once (OFFSET 0 keeps PostgreSQL from inlining the subquery, which would
  // compute an expression for every time the record reads it), then quoted.
  const values = dataset.columns.map((col, i) => `(${source.expression(col)})::text AS v${i}`);
  const record = csvRecordSql(dataset.columns.map((_, i) => `x.v${i}`));
  return `SELECT ${ROW}.organization_id, ${ROW}.id, ${ROW}.last_modified, ${record} AS line, ${cursor} AS signed_cursor
  FROM ${source.table} ${ROW}
  ${source.joins}
  CROSS JOIN LATERAL (SELECT ${values.join(", ")} OFFSET 0) x
  WHERE ${ROW}.organization_id = ${uuidLiteral(organizationId)}${filter ? ` AND (${filter})` : ""}`;
}
