import { createHash } from "node:crypto";
import { leadingUuid } from "@exportsvc/common";
import type { CursorCodec } from "../cursor";
import { ROW_SHAPE_VERSION, type DatasetKind } from "../registry";
import type { ResourceKind } from "../types";
import { integerLiteral, textLiteral, timestamptzLiteral, uuidLiteral } from "./literals";
import { UnsupportedDatasetError, type PageDataset, type PageRequest } from "./page-query";
import { RESOURCE_TABLES } from "./resources";

/** The deletion feed's CSV header (docs/api.md, "Deletions and rewrites"). */
export const DELETIONS_HEADER = ["id", "deleted_at", "_cursor"] as const;

/**
 * The feed a dataset's tombstones are written to (`dataset_tombstones.scope`, migration 045): the
 * resource table, `deviations`, or `form:<form id>` for a form's submission dataset and all its grids
 * (a deleted submission takes its grid rows with it). Keyed by source, so a renamed form keeps its feed.
 */
export function tombstoneScope(dataset: { kind: DatasetKind; sourceRef: string }): string {
  if (dataset.kind === "resource") {
    const table = RESOURCE_TABLES[dataset.sourceRef as ResourceKind];
    if (!table) throw new UnsupportedDatasetError(`unknown resource kind '${dataset.sourceRef}'`);
    return table;
  }
  if (dataset.kind === "deviations") return "deviations";
  const formId = leadingUuid(dataset.sourceRef);
  if (!formId) throw new UnsupportedDatasetError(`form dataset source '${dataset.sourceRef}' has no form id`);
  return `form:${formId}`;
}

/**
 * What a deletions cursor is bound to (beside organization and dataset key): the feed and its order
 * (deleted_at, id). Distinct from rowShape(), so a CSV cursor is never accepted by the feed or back.
 */
export function deletionsShape(dataset: { kind: DatasetKind; sourceRef: string }): string {
  const material = JSON.stringify([ROW_SHAPE_VERSION, "deletions", ["deleted_at", "id"], tombstoneScope(dataset)]);
  return `del:${createHash("sha256").update(material).digest("hex")}`;
}

/**
 * SQL condition on a tombstone `t` of the feed `scope` (tombstoneScope): its row exists again in
 * the source. Such a tombstone is not served, whatever the re-created row's stamp: a copy applies
 * the client's rule (delete only when `deleted_at` is newer than the stored row's `last_modified`)
 * to the version it holds, which may be older than the tombstone even when the source's is newer:
 * a row re-created stamped before its delete (a writer that took its stamp before a concurrent
 * delete committed, an explicit older `lastModified`), and then re-stamped after it in a
 * transaction that commits between the copy's pass over the rows and its pass over the feed.
 * Served, the tombstone would delete from that copy a row the source has (docs/api.md, "Applying
 * tombstones"). A tombstone means "gone": it is served once the row is gone again.
 */
function rowExistsAgain(scope: string, org: string): string {
  // A resource or deviation feed's scope is its table's name; a form's rows are its submissions.
  const [table, sameSource] = scope.startsWith("form:")
    ? ["submissions", ` AND s.form_id = ${uuidLiteral(scope.slice("form:".length))}`]
    : [scope, ""];
  return `EXISTS (SELECT 1 FROM ${table} s WHERE s.organization_id = ${org} AND s.id = t.id${sameSource})`;
}

/**
 * One page of a dataset's deletion feed as a SELECT whose columns are their final CSV text, for
 * `COPY (...) TO STDOUT (FORMAT csv)`: the same keyset walk, `WITH TIES` page rule, visibility horizon
 * and signed `_cursor` as buildPageQuery, over dataset_tombstones ordered by (deleted_at, id), less
 * the tombstones of rows that exist again (rowExistsAgain; filtered inside the page
 * window, so a page still holds `limit` tombstones while more follow). The cursor's position is
 * (deleted_at, id, 0).
 */
export function buildDeletionsQuery(dataset: PageDataset, request: Omit<PageRequest, "completedFromMicros" | "completedToMicros">, codec: CursorCodec): string {
  if (!Number.isInteger(request.limit) || request.limit < 1) throw new RangeError("limit must be a positive integer");
  const org = uuidLiteral(request.organizationId);
  const scope = tombstoneScope(dataset);
  const where = [`t.organization_id = ${org}`, `t.scope = ${textLiteral(scope)}`];
  if (request.after) {
    where.push(`(t.deleted_at, t.id) > (${timestamptzLiteral(request.after.lastModifiedMicros)}, ${uuidLiteral(request.after.id)})`);
  }
  if (request.visibleBeforeMicros !== undefined) where.push(`t.deleted_at < ${timestamptzLiteral(request.visibleBeforeMicros)}`);
  where.push(`NOT ${rowExistsAgain(scope, org)}`);
  const cursor = codec.sqlExpression(
    { organizationId: request.organizationId, datasetKey: dataset.key, rowShape: deletionsShape(dataset) },
    { lastModified: "d.deleted_at", id: "d.id" },
  );
  const label = `/* deletions ${dataset.key.replace(/[^A-Za-z0-9_]/g, "_")} org=${request.organizationId.toLowerCase()} */`;
  return `${label}
SELECT d.id, d.deleted_at, ${cursor} AS "_cursor"
FROM (
  SELECT t.id, t.deleted_at FROM dataset_tombstones t
  WHERE ${where.join("\n    AND ")}
  ORDER BY t.deleted_at, t.id
  FETCH FIRST ${integerLiteral(request.limit)} ROWS WITH TIES
) d
ORDER BY d.deleted_at, d.id`;
}
