import { Errors } from "@exportsvc/common";
import { buildRewritesQuery, rewriteKinds, rewritesPrunedPast, siteNameLookup } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportRewritesResponseSchema, type ExportRewritesRequest } from "@exportsvc/proto";
import { resumeChangeFeed } from "../cursor-check";
import { csvHeader, feedHandler, type ExportDependencies, type PagePlanner } from "../pages";
import { checkDeletionsParameters } from "../parameters";
import { visibilityHorizon } from "../visibility";

/**
 * ExportService.ExportRewrites: one page of a dataset's rewrite feed as CSV bytes (the dataset's own
 * columns and `_cursor`), the rows rewritten since the cursor with their current text, in rewrite
 * order. Same dataset lookup, limit, cursor verification, visibility horizon and streaming as the
 * CSV page (export-csv.ts) and the deletion feed (export-deletions.ts).
 */
export function exportRewritesHandler(deps: ExportDependencies) {
  return feedHandler(deps, "rewrites", (data) => create(ExportRewritesResponseSchema, { data }), rewritesPage(deps));
}

const rewritesPage =
  (deps: ExportDependencies): PagePlanner<ExportRewritesRequest> =>
  (request) =>
  async (dataset) => {
    const params = checkDeletionsParameters(request);
    const after = await resumeChangeFeed(deps.pool, deps.codec, request.organizationId, dataset, params.cursor, "rewrites", {
      prunedPast: (position) => rewritesPrunedPast(deps.pool, request.organizationId, rewriteKinds(dataset), position.lastModifiedMicros, position.rowIndex === 1),
      expired: () => Errors.rewritesCursorExpired(dataset.key),
    });
    // The session part of the rows' horizon (open transactions) holds the feed back: an entry is
    // written with the change that rewrote the row, stamped after its transaction began, so a held
    // cursor never skips an entry that commits late. Not a form's pending part: that holds rows until
    // they are materialized, and a quiet form's pending floor stays where it was; the feed serves the
    // text its rows have now, never older than what the CSV endpoint served.
    const { visibleBeforeMicros, source } = await visibilityHorizon(deps.pool, request.organizationId, null, { readReplica: deps.readReplica, logger: deps.logger });
    const siteNames = dataset.kind === "submission" ? siteNameLookup(deps.siteCounts?.get(request.organizationId), params.limit) : undefined;
    return {
      source,
      header: csvHeader(dataset),
      statement: () => ({ select: buildRewritesQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros, ...(siteNames ? { siteNames } : {}) }, deps.codec), format: "csv" }),
      logFields: { feed: "rewrites" },
    };
  };
