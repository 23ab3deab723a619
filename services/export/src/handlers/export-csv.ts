import {
  buildPageQuery,
  formIdOfDataset,
  servesStoredCursors,
  siteNameLookup,
  type CursorPosition,
} from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, type ExportCsvRequest } from "@exportsvc/proto";
import { callTraceId, grpcSink } from "@exportsvc/rpc";
import type { ChunkSink } from "../copy-stream";
import { resolveCursor } from "../cursor-check";
import { checkParameters } from "../parameters";
import {
  csvHeader,
  loadExportableDataset,
  notExportable,
  onOrganizationShare,
  pageHorizonStarter,
  streamCsv,
  withDatabase,
  type ExportCall,
  type ExportDependencies,
} from "../pages";

/** ExportService.ExportCsv: one dataset page as CSV bytes (header row, rows, `_cursor` last). */
export function exportCsvHandler(deps: ExportDependencies) {
  return async (request: ExportCsvRequest, call: ExportCall): Promise<void> => {
    const sink = grpcSink(call, (data) => create(ExportCsvResponseSchema, { data }));
    await onOrganizationShare(deps, request.organizationId, sink, () => exportPage(deps, request, sink, callTraceId(call.metadata)));
  };
}

async function exportPage(deps: ExportDependencies, request: ExportCsvRequest, sink: ChunkSink, traceId: string | undefined): Promise<void> {
  const started = process.hrtime.bigint();
  const horizonOf = pageHorizonStarter(deps, request, { metrics: deps.metrics, readReplica: deps.readReplica, logger: deps.logger });
  const dataset = await loadExportableDataset(deps, request, traceId);
  const params = checkParameters(request, dataset);
  const after: CursorPosition | undefined = params.cursor !== undefined
    ? await withDatabase(() => resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor!))
    : params.original;
  const { visibleBeforeMicros, source } = await withDatabase(() => horizonOf(formIdOfDataset(dataset)));

  // Form datasets: whether the rows' stored cursors are served, decided once for the query and the metric.
  const storedCursors = dataset.tableName !== undefined ? servesStoredCursors(dataset, request.organizationId, deps.codec) : undefined;
  const siteNames = dataset.kind === "submission" ? siteNameLookup(deps.siteCounts?.get(request.organizationId), params.limit) : undefined;
  let select: string;
  try {
    select = buildPageQuery(
      dataset,
      {
        organizationId: request.organizationId,
        limit: params.limit,
        storedCursors,
        after,
        completedFromMicros: params.completedFromMicros,
        completedToMicros: params.completedToMicros,
        visibleBeforeMicros,
        siteNames,
      },
      deps.codec,
    );
  } catch (err) {
    throw notExportable(deps.logger, dataset.key, err, traceId);
  }

  const header = csvHeader(dataset);
  const outcome = await streamCsv(deps, { source, select, header, sink, dataset, organizationId: request.organizationId, traceId, what: "export" });
  deps.metrics?.recordExport(dataset.kind, outcome.rows, outcome.bytes);
  if (storedCursors !== undefined) deps.metrics?.recordFormPage(storedCursors ? "stored" : "signed");
  deps.logger.info(
    {
      organizationId: request.organizationId,
      dataset: dataset.key,
      bytes: outcome.bytes,
      rows: outcome.rows,
      cancelled: outcome.cancelled,
      ...(siteNames ? { siteNames } : {}),
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    },
    "export page",
  );
}

