import { preparedStatement } from "@exportsvc/common";
import type { CursorBinding, CursorCodec, CursorPosition } from "../cursor";
import { rowShape } from "../registry";
import type { ColumnSpec, ResourceKind } from "../types";
import { attributeExpression } from "./attributes";
import { DEVIATION_EXPRESSIONS, DEVIATION_JOINS } from "./deviations";
import { identifier, integerLiteral, tableIdentifier, timestamptzLiteral, uuidLiteral } from "./literals";
import { RESOURCE_CORE_EXPRESSIONS, RESOURCE_TABLES, ROW } from "./resources";

/** What the page query needs to know about a dataset (a subset of the registry entry). */
export interface PageDataset {
  key: string;
  kind: "resource" | "deviations" | "submission" | "grid";
  /** Resource kind for resource datasets. */
  sourceRef: string;
  columns: ReadonlyArray<ColumnSpec>;
  /** Materialized table of a form dataset. */
  tableName?: string;
  /** Its rows' stored `_cursor` values were signed under this signature (RegistryEntry). */
  storedCursorSignature?: string;
}

/**
 * The column of a materialized form table holding each row's signed `_cursor` (when its
 * dataset_tables row records a cursor_signature); written by packages/form-datasets.
 */
export const STORED_CURSOR_COLUMN = "signed_cursor";

/**
 * What every session running page queries (CSV pages, deletion feeds) sets once per connection. JIT
 * off: page queries are short and their many per-row subplans inflate cost estimates, so JIT
 * compilation would cost more than the page itself. No parallel workers: a page is a keyset walk that
 * stops after `limit` rows, and starting workers costs more than the page (the deletion feed's
 * re-created-row probe drew a parallel plan four times slower than the serial one).
 */
export const PAGE_SESSION_SETTINGS_SQL = "SET jit = off; SET max_parallel_workers_per_gather = 0";

export interface PageRequest {
  organizationId: string;
  /** Rows per page before the rest of the last position group; 1..5000, validated by the caller. */
  limit: number;
  /**
   * Serve the `_cursor` values stored with the rows (servesStoredCursors); decided here when
   * undefined. A caller that also reports the decision passes it, so it is made once per page.
   */
  storedCursors?: boolean;
  /** Strictly after this position (cursor or modifiedSince/after/afterRowIndex). */
  after?: CursorPosition;
  /** submission completed_at >= from (µs since the Unix epoch). */
  completedFromMicros?: bigint;
  /** submission completed_at < to (µs since the Unix epoch). */
  completedToMicros?: bigint;
  /**
   * Visibility horizon (µs since the Unix epoch): only rows with last_modified strictly before it
   * are served, so that no write still in flight can later commit a row behind a cursor already
   * handed out (see services/export/src/visibility.ts).
   */
  visibleBeforeMicros?: bigint;
  /** How a submission page reads its site names (siteNameLookup); "join" when undefined. */
  siteNames?: SiteNameLookup;
  /**
   * Only the rows of these ids (an SQL query with a uuid column `id`), each looked up by its key:
   * a rendered page renders live only the rows its table lacks (buildRenderedPageQuery).
   */
  onlyIds?: string;
}

/**
 * How a submission page reads its envelope's live site name and path. Both give the same text:
 * - "join": one memoized probe of the organization's sites per row; its cost grows with the rows;
 * - "map": one jsonb map of the organization's sites per column, built once per page (an InitPlan),
 *   and a lookup per row; its cost grows with the organization's sites.
 * On a 5 000-row page of an organization with few sites the map costs half the join (docs/export.md,
 * "Site names").
 */
export type SiteNameLookup = "join" | "map";

/**
 * The map pays once a page may hold this many rows per site of the organization: building the two
 * maps costs ~1.2 µs a site, and the join ~0.2 µs a row more than their lookups (about 6 rows per
 * site to break even, measured on a 30-column form; docs/export.md, "Site names").
 */
export const SITE_MAP_ROWS_PER_SITE = 10;

/** The lookup for a page of up to `limit` rows of an organization with `siteCount` sites (undefined: not known yet). */
export function siteNameLookup(siteCount: number | undefined, limit: number): SiteNameLookup {
  return siteCount !== undefined && siteCount * SITE_MAP_ROWS_PER_SITE <= limit ? "map" : "join";
}

/** The organization's number of sites, for siteNameLookup ($1 organization). */
export const COUNT_SITES_SQL = preparedStatement("count-sites", "SELECT count(*)::int AS sites FROM sites WHERE organization_id = $1");

export class UnsupportedDatasetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsupportedDatasetError";
  }
}

export const hasRowIndex = (dataset: Pick<PageDataset, "kind" | "columns">): boolean =>
  dataset.kind === "grid" || dataset.columns.some((c) => c.key === "row_index");

export const hasCompletedAt = (dataset: Pick<PageDataset, "kind" | "columns">): boolean =>
  dataset.kind === "submission" || dataset.kind === "grid" || dataset.columns.some((c) => c.key === "completed_at");

/** The header row fields: the dataset's column keys, then `_cursor`. */
export const headerFields = (dataset: Pick<PageDataset, "columns">): string[] => [...dataset.columns.map((c) => c.key), "_cursor"];

/** Where a dataset's rows come from and how each column is rendered (shared by the CSV page and the rewrite feed). */
export interface Source {
  table: string;
  /** Extra joins of the outer query (deviations). */
  joins: string;
  expression(column: ColumnSpec): string;
}

export function sourceOf(dataset: PageDataset, organizationId: string, siteNames: SiteNameLookup): Source {
  if (dataset.kind === "resource") {
    const kind = dataset.sourceRef as ResourceKind;
    const core = RESOURCE_CORE_EXPRESSIONS[kind];
    if (!core) throw new UnsupportedDatasetError(`unknown resource kind '${dataset.sourceRef}'`);
    return {
      table: RESOURCE_TABLES[kind],
      joins: "",
      expression: (column) => {
        const source = column.source;
        if (source.kind === "attribute") return attributeExpression(source.attributeId, source.attributeType);
        if (source.kind === "core" && core[source.name]) return core[source.name];
        throw new UnsupportedDatasetError(`column '${column.key}' has no source on ${dataset.key}`);
      },
    };
  }
  if (dataset.kind === "deviations") {
    return {
      table: "deviations",
      joins: DEVIATION_JOINS,
      expression: (column) => {
        const source = column.source;
        if (source.kind === "core" && DEVIATION_EXPRESSIONS[source.name]) return DEVIATION_EXPRESSIONS[source.name];
        throw new UnsupportedDatasetError(`column '${column.key}' has no source on ${dataset.key}`);
      },
    };
  }
  if (!dataset.tableName) throw new UnsupportedDatasetError(`form dataset ${dataset.key} has no materialized table`);
  const siteId = dataset.kind === "submission" ? dataset.columns.find((c) => c.key === "site_id")?.source : undefined;
  const siteIdColumn = siteId?.kind === "table" ? siteId.column : undefined;
  const org = uuidLiteral(organizationId);
  // Either way one pass over the organization's sites per page, never two correlated look-ups per
  // row, which cost more than the rest of the row together (issue 15). The map is keyed by the id's
  // canonical text, which is what the site id column holds (rendered from submissions.site_id).
  const siteName = (name: "name" | "path") =>
    siteNames === "map"
      ? `(SELECT jsonb_object_agg(s.id::text, s.${name}) FROM sites s WHERE s.organization_id = ${org}) ->> ${ROW}.${identifier(siteIdColumn!)}`
      : `${LIVE_SITE}.${name}`;
  return {
    table: tableIdentifier(dataset.tableName),
    joins:
      siteIdColumn && siteNames === "join"
        ? `LEFT JOIN sites ${LIVE_SITE} ON ${LIVE_SITE}.organization_id = ${org} AND ${LIVE_SITE}.id = NULLIF(${ROW}.${identifier(siteIdColumn)}, '')::uuid`
        : "",
    expression: (column) => {
      if (column.source.kind !== "table") throw new UnsupportedDatasetError(`column '${column.key}' has no table column`);
      // The envelope's site names are read live, like every related-record name (docs/contract.md §8: "reads the
      // related record as it stands; if that record is deleted the name is empty while the id stays"),
      // so a renamed or deleted site shows on a full re-read without touching the rows. A form field
      // keyed site_name gets a suffixed key (the envelope is named first), so these keys are the envelope's.
      if (siteIdColumn && (column.key === "site_name" || column.key === "site_path")) {
        return siteName(column.key === "site_name" ? "name" : "path");
      }
      // Materialized columns already hold their final CSV text (packages/form-datasets renders them).
      return `${ROW}.${identifier(column.source.column)}`;
    },
  };
}

/**
 * Whether a page of this dataset serves the `_cursor` values stored with its rows: only when this
 * keyring would sign them byte-identically (docs/cursor.md, "Stored cursors").
 */
export function servesStoredCursors(dataset: PageDataset, organizationId: string, codec: CursorCodec): boolean {
  if (dataset.tableName === undefined || dataset.storedCursorSignature === undefined) return false;
  return codec.keyForStoredSignature(dataset.storedCursorSignature, rowsBinding(organizationId, dataset)) !== undefined;
}

/** What the `_cursor` of a dataset's rows is bound to (docs/cursor.md): fixed for a key's life. */
export function rowsBinding(organizationId: string, dataset: Pick<PageDataset, "key" | "kind" | "sourceRef">): CursorBinding {
  return { organizationId, datasetKey: dataset.key, rowShape: rowShape(dataset) };
}

/** The alias of the envelope's live site in a form dataset page. */
const LIVE_SITE = "live_site";

/**
 * The page as one SELECT whose every column is already its final CSV text, ending with the signed
 * `_cursor`, for `COPY (...) TO STDOUT (FORMAT csv)`.
 *
 * The inner query walks the (organization_id, last_modified, id[, row_index]) index strictly after
 * the position and keeps the first `limit` rows plus the rest of the last (last_modified, id) group
 * (`FETCH FIRST n ROWS WITH TIES`); it computes nothing. The outer query renders the expensive
 * columns (related names, lists, attributes, the MAC) for those rows only.
 */
export function buildPageQuery(dataset: PageDataset, request: PageRequest, codec: CursorCodec): string {
  const source = sourceOf(dataset, request.organizationId, request.siteNames ?? "join");
  const grid = hasRowIndex(dataset);
  const org = uuidLiteral(request.organizationId);
  if (!Number.isInteger(request.limit) || request.limit < 1) throw new RangeError("limit must be a positive integer");

  const where = [`t.organization_id = ${org}`];
  if (request.after) {
    const { lastModifiedMicros, id, rowIndex } = request.after;
    where.push(
      grid
        ? `(t.last_modified, t.id, t.row_index) > (${timestamptzLiteral(lastModifiedMicros)}, ${uuidLiteral(id)}, ${integerLiteral(rowIndex)})`
        : `(t.last_modified, t.id) > (${timestamptzLiteral(lastModifiedMicros)}, ${uuidLiteral(id)})`,
    );
  }
  // Materialized form tables carry their submission's completed_at on every row (grids included).
  if (request.completedFromMicros !== undefined) where.push(`t.completed_at >= ${timestamptzLiteral(request.completedFromMicros)}`);
  if (request.completedToMicros !== undefined) where.push(`t.completed_at < ${timestamptzLiteral(request.completedToMicros)}`);
  if (request.visibleBeforeMicros !== undefined) where.push(`t.last_modified < ${timestamptzLiteral(request.visibleBeforeMicros)}`);

  const computed = codec.sqlExpression(rowsBinding(request.organizationId, dataset), {
    lastModified: `${ROW}.last_modified`,
    id: `${ROW}.id`,
    ...(grid ? { rowIndex: `${ROW}.row_index` } : {}),
  });
  // A row stored without a cursor (its writer could not sign under the table's signature) gets it computed.
  const stored = request.storedCursors ?? servesStoredCursors(dataset, request.organizationId, codec);
  const cursor = stored ? `COALESCE(${ROW}.${STORED_CURSOR_COLUMN}, ${computed})` : computed;
  const columns = dataset.columns.map((c) => `${source.expression(c)} AS ${identifier(c.key)}`);
  const order = grid ? `${ROW}.last_modified, ${ROW}.id, ${ROW}.row_index` : `${ROW}.last_modified, ${ROW}.id`;
  // A lateral look-up per id: the keyset walk would read on past the ids' rows to the dataset's end.
  const rows = request.onlyIds
    ? `(${request.onlyIds}) only_ids CROSS JOIN LATERAL (SELECT s.* FROM ${source.table} s WHERE s.organization_id = ${org} AND s.id = only_ids.id) t`
    : `${source.table} t`;

  // Leads the statement so operators can tell exports apart in pg_stat_activity (query text is truncated).
  const label = `/* export ${dataset.key.replace(/[^A-Za-z0-9_]/g, "_")} org=${request.organizationId.toLowerCase()} */`;
  return `${label}
SELECT ${[...columns, `${cursor} AS "_cursor"`].join(",\n  ")}
FROM (
  SELECT t.* FROM ${rows}
  WHERE ${where.join("\n    AND ")}
  ORDER BY t.last_modified, t.id
  FETCH FIRST ${integerLiteral(request.limit)} ROWS WITH TIES
) ${ROW}
${source.joins}
ORDER BY ${order}`;
}
