import {
  buildPageQuery,
  buildRenderedPageQuery,
  formIdOfDataset,
  isRenderedKind,
  loadRenderedPlan,
  renderedPageShape,
  RENDERED_PAGE_COPY_FORMAT,
  servesRendered,
  servesStoredCursors,
  siteNameLookup,
  type CursorPosition,
  type PageRequest,
} from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, type ExportCsvRequest } from "@exportsvc/proto";
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
      // Resource datasets and deviations: their rendered table's state (docs/export.md, "Rendered datasets"), read from
      // the same database as the page. Read through the table while it is current or patchable (only the rows written
      // since its render rendered live); the page's statement decides again in its own snapshot.
      const rendered = isRenderedKind(dataset) ? await loadRenderedPlan(source, request.organizationId, dataset) : undefined;
      const fromTable = rendered?.patchable === true && servesRendered(dataset, rendered.state) ? rendered.state : undefined;
      const renderedSource = !fromTable ? "live" : rendered?.current ? "table" : "patched";
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
      return {
        source,
        header: csvHeader(dataset),
        select: () => (fromTable ? buildRenderedPageQuery(dataset, fromTable, page, deps.codec, renderedPageShape(rendered!)) : buildPageQuery(dataset, page, deps.codec)),
        format: fromTable ? RENDERED_PAGE_COPY_FORMAT : undefined,
        logFields: { ...(siteNames ? { siteNames } : {}), ...(isRenderedKind(dataset) ? { rendered: renderedSource } : {}) },
        streamed: (outcome) => {
          deps.metrics?.recordExport(dataset.kind, outcome.rows, outcome.bytes);
          if (storedCursors !== undefined) deps.metrics?.recordFormPage(storedCursors ? "stored" : "signed");
          if (isRenderedKind(dataset)) deps.metrics?.recordRenderedPage(renderedSource);
        },
      };
    };
  };
