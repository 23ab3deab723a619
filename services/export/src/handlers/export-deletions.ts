import { Errors } from "@exportsvc/common";
import { buildDeletionsQuery, DELETIONS_HEADER, formIdOfDataset, pendingTombstonesHorizon, tombstoneScope, tombstonesPrunedPast, type CursorPosition } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportDeletionsResponseSchema, type ExportDeletionsRequest } from "@exportsvc/proto";
import { resolveCursor } from "../cursor-check";
import { csvField, feedHandler, pageHorizonStarter, type ExportDependencies, type Feed } from "../pages";
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
  (deps: ExportDependencies): Feed<ExportDeletionsRequest> =>
  (request) => {
    const horizonOf = pageHorizonStarter(deps, request, { readReplica: deps.readReplica, logger: deps.logger });
    return async (dataset) => {
      const params = checkDeletionsParameters(request);
      let after: CursorPosition | undefined;
      if (params.cursor !== undefined) {
        const position = await resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor, "deletions");
        if (await tombstonesPrunedPast(deps.pool, request.organizationId, tombstoneScope(dataset), position.lastModifiedMicros, position.id)) {
          throw Errors.deletionsCursorExpired(dataset.key);
        }
        after = position;
      }
      // The rows' horizon (open transactions; pending changes of a form) holds the feed back too, so a
      // tombstone never overtakes a write still in flight, then the form feed's own rule above.
      const { visibleBeforeMicros: rowsHorizon, source } = await horizonOf(formIdOfDataset(dataset));
      const pending = await pendingTombstonesHorizon(deps.pool, request.organizationId, tombstoneScope(dataset));
      const visibleBeforeMicros = pending !== undefined && pending < rowsHorizon ? pending : rowsHorizon;
      return {
        source,
        header: HEADER,
        select: () => buildDeletionsQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros }, deps.codec),
        logFields: { feed: "deletions" },
      };
    };
  };
