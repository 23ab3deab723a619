import { createHash } from "node:crypto";
import type { CursorCodec } from "../cursor";
import { ROW_SHAPE_VERSION, type DatasetKind } from "../registry";
import type { ResourceKind } from "../types";
import { identifier, integerLiteral, textLiteral, timestamptzLiteral, uuidLiteral } from "./literals";
import { tombstoneScope } from "./deletions-query";
import { hasRowIndex, sourceOf, UnsupportedDatasetError, type PageDataset, type PageRequest } from "./page-query";
import { RESOURCE_TABLES, ROW } from "./resources";

/**
 * One way a row shows a changed record: the row's own column `column` holds the record's id, or
 * (with `via`) a row of `table` joined to it (`table.<join> = row.<row>`) does.
 */
export interface RewriteReference {
  /** The rewrite log's kind (migration 120): a named table, or what else changed. */
  kind: string;
  /** The table holding `column`; the row's own table when absent. */
  table?: string;
  column: string;
  via?: { join: string; row: string };
}

const own = (kind: string, column: string): RewriteReference => ({ kind, column });
/** A link table `table (<row column>, <column>)` listing the row's related records. */
const link = (kind: string, table: string, column: string, rowColumn: string): RewriteReference => ({ kind, table, column, via: { join: rowColumn, row: "id" } });
/** The record shown by the row's own submission (deviations borrow it). */
const submission = (kind: string, column: string, row = "submission_id"): RewriteReference => ({ kind, table: "submissions", column, via: { join: "id", row } });

/**
 * The one list of the references a feed's rows show, per feed (a resource table, `deviations`,
 * `form`: a submission dataset's live site). The references of named records (sites ... areas) are
 * exactly those the export looks names up by (services/catalog/test/rewrite-counters.test.ts
 * derives them from the export's SQL); migration 120's rewrite_kind_feeds() maps each kind to these
 * feeds (the same test compares). A grid shows no related record.
 */
export const REWRITE_REFERENCES: Record<string, readonly RewriteReference[]> = {
  equipment: [own("sites", "site_id"), own("areas", "area_id")],
  areas: [own("sites", "site_id"), own("areas", "parent_id")],
  lots: [own("sites", "site_id"), own("products", "product_id")],
  products: [
    link("sites", "product_sites", "site_id", "product_id"),
    link("suppliers", "supplier_products", "supplier_id", "product_id"),
    link("customers", "customer_products", "customer_id", "product_id"),
    own("product_categories", "product_category_id"),
    own("product_links", "id"),
  ],
  chemicals: [link("sites", "chemical_sites", "site_id", "chemical_id")],
  employees: [link("sites", "employee_sites", "site_id", "employee_id"), link("teams", "employee_teams", "team_id", "employee_id")],
  documents: [
    link("sites", "document_sites", "site_id", "document_id"),
    link("teams", "document_teams", "team_id", "document_id"),
    own("documents", "id"),
    own("document_versions", "id"),
  ],
  suppliers: [link("products", "supplier_products", "product_id", "supplier_id"), link("suppliers", "supplier_parents", "parent_supplier_id", "supplier_id")],
  customers: [link("products", "customer_products", "product_id", "customer_id")],
  product_categories: [own("product_categories", "parent_id")],
  recipes: [own("products", "output_product_id")],
  deviations: [
    submission("sites", "site_id"),
    own("teams", "assigned_team_id"),
    own("employees", "assigned_user_id"),
    own("employees", "resolved_by_id"),
    own("employees", "signed_by_id"),
    own("suppliers", "supplier_id"),
    own("submissions", "submission_id"),
    own("submissions", "linked_record_id"),
    own("submission_steps", "step_id"),
    submission("forms", "form_id"),
    submission("forms", "form_id", "linked_record_id"),
    own("deviation_notes", "id"),
  ],
  form: [own("sites", "site_id")],
  grid: [],
};

/** The feed of REWRITE_REFERENCES a dataset's rows belong to. */
export function rewriteFeed(dataset: { kind: DatasetKind; sourceRef: string }): string {
  if (dataset.kind === "resource") {
    const table = RESOURCE_TABLES[dataset.sourceRef as ResourceKind];
    if (!table) throw new UnsupportedDatasetError(`unknown resource kind '${dataset.sourceRef}'`);
    return table;
  }
  return dataset.kind === "deviations" ? "deviations" : dataset.kind === "submission" ? "form" : "grid";
}

/**
 * What a rewrites cursor is bound to (beside organization and dataset key): the feed and its order
 * (an entry's rewritten_at, then the row's id). Distinct from rowShape() and deletionsShape(), so no
 * feed accepts another's cursor.
 */
export function rewritesShape(dataset: { kind: DatasetKind; sourceRef: string }): string {
  const material = JSON.stringify([ROW_SHAPE_VERSION, "rewrites", ["rewritten_at", "id", "group_done"], tombstoneScope(dataset)]);
  return `rw:${createHash("sha256").update(material).digest("hex")}`;
}

/** The log kinds a dataset's feed reads (none for a grid, or a submission dataset without its site). */
export function rewriteKinds(dataset: PageDataset): string[] {
  return [...new Set(references(dataset).map((r) => r.kind))];
}

function references(dataset: PageDataset): readonly RewriteReference[] {
  const refs = REWRITE_REFERENCES[rewriteFeed(dataset)];
  if (dataset.kind !== "submission") return refs;
  // A submission dataset's site id column holds the id as text (rendered by packages/form-datasets).
  const siteId = dataset.columns.find((c) => c.key === "site_id")?.source;
  return siteId?.kind === "table" ? [own("sites", siteId.column)] : [];
}

/** SQL: row `t` shows the record `record` through `ref`. */
function shows(dataset: PageDataset, ref: RewriteReference, t: string, record: string): string {
  if (!ref.table) {
    return dataset.kind === "submission" ? `${t}.${identifier(ref.column)} = ${record}::text` : `${t}.${identifier(ref.column)} = ${record}`;
  }
  const via = ref.via!;
  return `EXISTS (SELECT 1 FROM ${identifier(ref.table)} j WHERE j.organization_id = ${t}.organization_id AND j.${identifier(via.join)} = ${t}.${identifier(via.row)} AND j.${identifier(ref.column)} = ${record})`;
}

/**
 * One page of a dataset's rewrite feed as a SELECT whose columns are their final CSV text (the
 * dataset's own columns, rendered exactly as the CSV page renders them, then `_cursor`), for
 * `COPY (...) TO STDOUT (FORMAT csv)`.
 *
 * The log holds one entry per changed record (migration 120); entries with the same rewritten_at
 * form a group. A row is served at the latest group (before the visibility horizon) that has an
 * entry it shows, once, with its current text; within a group in id order. Only groups from the
 * cursor's on are read: a row's latest group among them is its latest at all. Of a record logged
 * several times only the latest entry counts (the earlier ones expand to the same rows, all served
 * later), so a group every entry of which was logged again costs nothing. Each group walks the
 * dataset's rows in id order (the (organization_id, id) index) testing the references of its
 * entries, and stops after `limit` rows: a rename shown by a million rows costs the reader a walk
 * spread over its pages, the writer one entry.
 *
 * The cursor's position is (group's rewritten_at, row id, done): done = 1 on a group's last row, so
 * the next page starts after the group instead of walking its remainder again. A row deleted since is
 * not served (its tombstone is); a row that no longer shows the record was edited (its last_modified
 * moved: the CSV endpoint serves it).
 */
export function buildRewritesQuery(dataset: PageDataset, request: Omit<PageRequest, "completedFromMicros" | "completedToMicros">, codec: CursorCodec): string {
  if (!Number.isInteger(request.limit) || request.limit < 1) throw new RangeError("limit must be a positive integer");
  const org = uuidLiteral(request.organizationId);
  const source = sourceOf(dataset, request.organizationId, request.siteNames ?? "join");
  const refs = references(dataset);
  const kinds = [...new Set(refs.map((r) => r.kind))];
  const limit = integerLiteral(request.limit);
  const entries = [`l.organization_id = ${org}`, `l.kind = ANY (ARRAY[${kinds.map(textLiteral).join(", ")}]::text[])`];
  const rows = [`t.organization_id = ${org}`];
  const after = request.after;
  if (after) {
    const at = timestamptzLiteral(after.lastModifiedMicros);
    if (after.rowIndex === 1) {
      entries.push(`l.rewritten_at > ${at}`);
    } else {
      entries.push(`l.rewritten_at >= ${at}`);
      // The cursor's group resumes after its row, later groups from their start: one bound the id
      // index can seek to (an OR of the two walked the group's served rows again on every page).
      const id = uuidLiteral(after.id);
      rows.push(`t.id >= CASE WHEN g.rewritten_at > ${at} THEN '00000000-0000-0000-0000-000000000000'::uuid ELSE ${id} END`);
      rows.push(`(g.rewritten_at > ${at} OR t.id <> ${id})`);
    }
  }
  if (request.visibleBeforeMicros !== undefined) entries.push(`l.rewritten_at < ${timestamptzLiteral(request.visibleBeforeMicros)}`);
  const covers = (e: string) =>
    kinds.length === 0
      ? "false"
      : kinds
          .map((k) => `(${e}.kind = ${textLiteral(k)} AND (${refs.filter((r) => r.kind === k).map((r) => shows(dataset, r, "t", `${e}.record_id`)).join(" OR ")}))`)
          .join(" OR ");
  // OFFSET 0 keeps each test a per-row subplan: pulled up into a semi-join, it made the planner scan
  // and sort every row of the group for each page instead of walking the id index to `limit` rows.
  rows.push(`EXISTS (SELECT 1 FROM e WHERE e.rewritten_at = g.rewritten_at AND (${covers("e")}) OFFSET 0)`);
  rows.push(`NOT EXISTS (SELECT 1 FROM e WHERE e.rewritten_at > g.rewritten_at AND (${covers("e")}) OFFSET 0)`);
  const cursor = codec.sqlExpression(
    { organizationId: request.organizationId, datasetKey: dataset.key, rowShape: rewritesShape(dataset) },
    { lastModified: `${ROW}._rw_at`, id: `${ROW}.id`, rowIndex: `${ROW}._rw_done` },
  );
  const columns = dataset.columns.map((c) => `${source.expression(c)} AS ${identifier(c.key)}`);
  const order = hasRowIndex(dataset) ? `${ROW}._rw_at, ${ROW}.id, ${ROW}.row_index` : `${ROW}._rw_at, ${ROW}.id`;
  const label = `/* rewrites ${dataset.key.replace(/[^A-Za-z0-9_]/g, "_")} org=${request.organizationId.toLowerCase()} */`;
  // Each group fetches one row more than the page can hold, so that a row knows whether it is its
  // group's last; the walk carries the whole row, so the page reads each row once.
  return `${label}
WITH e AS MATERIALIZED (
  SELECT DISTINCT ON (l.kind, l.record_id) l.rewritten_at, l.kind, l.record_id FROM dataset_rewrite_log l
  WHERE ${entries.join("\n    AND ")}
  ORDER BY l.kind, l.record_id, l.rewritten_at DESC
)
SELECT ${[...columns, `${cursor} AS "_cursor"`].join(",\n  ")}
FROM (
  SELECT x.*, g.rewritten_at AS _rw_at, CASE WHEN x._rw_next IS NULL THEN 1 ELSE 0 END AS _rw_done
  FROM (SELECT DISTINCT rewritten_at FROM e ORDER BY rewritten_at) g
  CROSS JOIN LATERAL (
    SELECT y.*, lead(y.id) OVER (ORDER BY y.id) AS _rw_next FROM (
      SELECT t.* FROM ${source.table} t
      WHERE ${rows.join("\n        AND ")}
      ORDER BY t.id
      LIMIT ${integerLiteral(request.limit + 1)}
    ) y
  ) x
  ORDER BY g.rewritten_at, x.id
  LIMIT ${limit}
) ${ROW}
${source.joins}
ORDER BY ${order}`;
}
