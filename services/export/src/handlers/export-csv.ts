import {
  buildPageQuery,
  formIdOfDataset,
  isRenderedKind,
  loadRenderedPlan,
  renderedPageStatement,
  servesStoredCursors,
  siteNameLookup,
  type CursorPosition,
  type PageRequest,
  type RenderedPageSource,
  type RenderedPlan,
} from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, type ExportCsvRequest } from "@exportsvc/proto";
import type { CopyStatement } from "../copy-stream";
import { resolveCursor } from "../cursor-check";
import { renderedPlanStarter } from "../rendered-plan";
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
    const planOf = renderedPlanStarter(deps.pool, request);
    return async (dataset) => {
      const params = checkParameters(request, dataset);
      const after: CursorPosition | undefined = params.cursor !== undefined ? await resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor) : params.original;
      // Resource datasets and deviations: read from their rendered table while it is current, patched while it is
      // patchable, else live, as their state says (docs/export.md, "Rendered datasets").
      const rendered = isRenderedKind(dataset);
      const [{ visibleBeforeMicros, source }, plan] = await Promise.all([horizonOf(formIdOfDataset(dataset)), rendered ? planOf(dataset) : undefined]);
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
      let renderedSource: RenderedPageSource | undefined;
      // The statement's guard refuses a plan that no longer holds in its snapshot (a render or a write in
      // between): planned again once from a fresh state, then live, which needs no plan.
      const renderedStatement = (planned: RenderedPlan | undefined, replans: number): CopyStatement => {
        const statement = renderedPageStatement(planned, dataset, page, deps.codec);
        renderedSource = logFields.rendered = statement.source;
        if (statement.source === "live") return statement;
        const replan = async () => {
          deps.metrics?.recordRenderedPageReplan();
          return renderedStatement(replans > 0 ? await loadRenderedPlan(deps.pool, request.organizationId, dataset) : undefined, replans - 1);
        };
        return { ...statement, replan };
      };
      return {
        source,
        header: csvHeader(dataset),
        statement: () => (rendered ? renderedStatement(plan, 1) : { select: buildPageQuery(dataset, page, deps.codec), format: "csv" }),
        logFields,
        streamed: (outcome) => {
          deps.metrics?.recordExport(dataset.kind, outcome.rows, outcome.bytes);
          if (storedCursors !== undefined) deps.metrics?.recordFormPage(storedCursors ? "stored" : "signed");
          if (renderedSource) deps.metrics?.recordRenderedPage(renderedSource);
        },
      };
    };
  };
