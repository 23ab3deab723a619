import { Errors } from "@exportsvc/common";
import { buildDeletionsQuery, DELETIONS_HEADER, formIdOfDataset, pendingTombstonesHorizon, tombstoneScope, tombstonesPrunedPast } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportDeletionsResponseSchema, type ExportDeletionsRequest } from "@exportsvc/proto";
import { resumeChangeFeed } from "../cursor-check";
import { csvField, feedHandler, pageHorizonStarter, type ExportDependencies, type PagePlanner } from "../pages";
import { checkDeletionsParameters } from "../parameters";

const HEADER = Buffer.from(`${DELETIONS_HEADER.map(csvField).join(",")}\n`, "utf8");

/**
 * ExportService.ExportDeletions: one page of a dataset's deletion feed as CSV bytes (`id`,
 * `deleted_at`, `_cursor`), oldest first. Same dataset lookup, limit, cursor verification, visibility
 * horizon and streaming as the CSV page (export-csv.ts); only the query and the header differ.
 */
export function exportDeletionsHandler(deps: ExportDependencies) {
  return feedHandler(deps, "deletions", (data) => create(ExportDeletionsResponseSchema, { data }), deletionsPage(deps));
}

const deletionsPage =
  (deps: ExportDependencies): PagePlanner<ExportDeletionsRequest> =>
  (request) => {
    const horizonOf = pageHorizonStarter(deps, request, { readReplica: deps.readReplica, logger: deps.logger });
    return async (dataset) => {
      const params = checkDeletionsParameters(request);
      const after = await resumeChangeFeed(deps.pool, deps.codec, request.organizationId, dataset, params.cursor, "deletions", {
        prunedPast: (position) => tombstonesPrunedPast(deps.pool, request.organizationId, tombstoneScope(dataset), position.lastModifiedMicros, position.id),
        expired: () => Errors.deletionsCursorExpired(dataset.key),
      });
      // The rows' horizon (open transactions; pending changes of a form) holds the feed back too, so a
      // tombstone never overtakes a write still in flight, then the form feed's own rule above.
      const { visibleBeforeMicros: rowsHorizon, source } = await horizonOf(formIdOfDataset(dataset));
      const pending = await pendingTombstonesHorizon(deps.pool, request.organizationId, tombstoneScope(dataset));
      const visibleBeforeMicros = pending !== undefined && pending < rowsHorizon ? pending : rowsHorizon;
      return {
        source,
        header: HEADER,
        statement: () => ({ select: buildDeletionsQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros }, deps.codec), format: "csv" }),
        logFields: { feed: "deletions" },
      };
    };
  };
