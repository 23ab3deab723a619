import { createHash } from "node:crypto";
import type { CursorCodec } from "../cursor";
import { ROW_SHAPE_VERSION, type DatasetKind } from "../registry";
import { identifier, integerLiteral, textLiteral, timestamptzLiteral, uuidLiteral } from "./literals";
import { tombstoneScope } from "./deletions-query";
import { hasRowIndex, sourceOf, type PageDataset, type PageRequest } from "./page-query";
import { ROW } from "./resources";

/**
 * The feed a dataset's rewrite log entries are written to (`dataset_rewrite_log.scope`, migration
 * 120): the same scopes as the tombstones (a form's submission dataset and its grids share one).
 */
export const rewriteScope = tombstoneScope;

/**
 * What a rewrites cursor is bound to (beside organization and dataset key): the feed and its order
 * (rewritten_at, id). Distinct from rowShape() and deletionsShape(), so no feed accepts another's cursor.
 */
export function rewritesShape(dataset: { kind: DatasetKind; sourceRef: string }): string {
  const material = JSON.stringify([ROW_SHAPE_VERSION, "rewrites", ["rewritten_at", "id"], rewriteScope(dataset)]);
  return `rw:${createHash("sha256").update(material).digest("hex")}`;
}

/**
 * One page of a dataset's rewrite feed as a SELECT whose columns are their final CSV text (the
 * dataset's own columns, rendered exactly as the CSV page renders them, then `_cursor`), for
 * `COPY (...) TO STDOUT (FORMAT csv)`.
 *
 * The inner query walks the log of the dataset's scope by (rewritten_at, id) strictly after the
 * position and before the visibility horizon, keeps each row's latest entry only (an entry with a
 * later one before the horizon is skipped: the row is served once, at its latest position) and the
 * first `limit` rows plus the rest of the last position (`WITH TIES`). The outer query renders the
 * rows those ids name today (a grid's every row of the submission; a row deleted since is not served,
 * its tombstone is). The cursor's position is (rewritten_at, id, 0).
 */
export function buildRewritesQuery(dataset: PageDataset, request: Omit<PageRequest, "completedFromMicros" | "completedToMicros">, codec: CursorCodec): string {
  if (!Number.isInteger(request.limit) || request.limit < 1) throw new RangeError("limit must be a positive integer");
  const org = uuidLiteral(request.organizationId);
  const scope = rewriteScope(dataset);
  const source = sourceOf(dataset, request.organizationId, request.siteNames ?? "join");
  const horizon = request.visibleBeforeMicros !== undefined ? timestamptzLiteral(request.visibleBeforeMicros) : undefined;
  const where = [`l.organization_id = ${org}`, `l.scope = ${textLiteral(scope)}`];
  if (request.after) {
    where.push(`(l.rewritten_at, l.id) > (${timestamptzLiteral(request.after.lastModifiedMicros)}, ${uuidLiteral(request.after.id)})`);
  }
  if (horizon) where.push(`l.rewritten_at < ${horizon}`);
  where.push(
    `NOT EXISTS (SELECT 1 FROM dataset_rewrite_log n WHERE n.organization_id = l.organization_id AND n.scope = l.scope AND n.id = l.id
        AND n.rewritten_at > l.rewritten_at${horizon ? ` AND n.rewritten_at < ${horizon}` : ""})`,
  );
  const cursor = codec.sqlExpression(
    { organizationId: request.organizationId, datasetKey: dataset.key, rowShape: rewritesShape(dataset) },
    { lastModified: "w.rewritten_at", id: "w.id" },
  );
  const columns = dataset.columns.map((c) => `${source.expression(c)} AS ${identifier(c.key)}`);
  const order = hasRowIndex(dataset) ? `w.rewritten_at, w.id, ${ROW}.row_index` : "w.rewritten_at, w.id";
  const label = `/* rewrites ${dataset.key.replace(/[^A-Za-z0-9_]/g, "_")} org=${request.organizationId.toLowerCase()} */`;
  return `${label}
SELECT ${[...columns, `${cursor} AS "_cursor"`].join(",\n  ")}
FROM (
  SELECT DISTINCT l.rewritten_at, l.id FROM dataset_rewrite_log l
  WHERE ${where.join("\n    AND ")}
  ORDER BY l.rewritten_at, l.id
  FETCH FIRST ${integerLiteral(request.limit)} ROWS WITH TIES
) w
JOIN ${source.table} ${ROW} ON ${ROW}.organization_id = ${org} AND ${ROW}.id = w.id
${source.joins}
ORDER BY ${order}`;
}
