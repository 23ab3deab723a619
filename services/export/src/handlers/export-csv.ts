import {
  buildPageQuery,
  formIdOfDataset,
  isRenderedKind,
  renderedPageStatement,
  servesStoredCursors,
  siteNameLookup,
  type CursorPosition,
  type PageRequest,
  type RenderedPageSource,
} from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, type ExportCsvRequest } from "@exportsvc/proto";
import type { StatementInSnapshot } from "../copy-stream";
import { resolveCursor } from "../cursor-check";
import { checkParameters } from "../parameters";
import { csvHeader, feedHandler, pageHorizonStarter, type ExportDependencies, type PagePlanner } from "../pages";

/** ExportService.ExportCsv: one dataset page as CSV bytes (header row, rows, `_cursor` last). */
export function exportCsvHandler(deps: ExportDependencies) {
  return feedHandler(deps, "export", (data) => create(ExportCsvResponseSchema, { data }), csvPage(deps));
}

const csvPage =
  (deps: ExportDependencies): PagePlanner<ExportCsvRequest> =>
  (request) => {
    const horizonOf = pageHorizonStarter(deps, request, { metrics: deps.metrics, readReplica: deps.readReplica, logger: deps.logger });
    return async (dataset) => {
      const params = checkParameters(request, dataset);
      const after: CursorPosition | undefined = params.cursor !== undefined ? await resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor) : params.original;
      const { visibleBeforeMicros, source } = await horizonOf(formIdOfDataset(dataset));
      // Form datasets: whether the rows' stored cursors are served, decided once for the query and the metric.
      const storedCursors = dataset.tableName !== undefined ? servesStoredCursors(dataset, request.organizationId, deps.codec) : undefined;
      const siteNames = dataset.kind === "submission" ? siteNameLookup(deps.siteCounts?.get(request.organizationId), params.limit) : undefined;
      const page: PageRequest = {
        organizationId: request.organizationId,
        limit: params.limit,
        storedCursors,
        after,
        completedFromMicros: params.completedFromMicros,
        completedToMicros: params.completedToMicros,
        visibleBeforeMicros,
        siteNames,
      };
      const logFields: Record<string, unknown> = siteNames ? { siteNames } : {};
      // Resource datasets and deviations: read from their rendered table while it is current, patched while it is
      // patchable, else live, as their state says in the page's own snapshot (docs/export.md, "Rendered datasets").
      let renderedSource: RenderedPageSource | undefined;
      const rendered: StatementInSnapshot = async (db) => {
        const statement = await renderedPageStatement(db, dataset, page, deps.codec);
        renderedSource = logFields.rendered = statement.source;
        return statement;
      };
      return {
        source,
        header: csvHeader(dataset),
        statement: () => (isRenderedKind(dataset) ? rendered : { select: buildPageQuery(dataset, page, deps.codec), format: "csv" }),
        logFields,
        streamed: (outcome) => {
          deps.metrics?.recordExport(dataset.kind, outcome.rows, outcome.bytes);
          if (storedCursors !== undefined) deps.metrics?.recordFormPage(storedCursors ? "stored" : "signed");
          if (renderedSource) deps.metrics?.recordRenderedPage(renderedSource);
        },
      };
    };
  };
