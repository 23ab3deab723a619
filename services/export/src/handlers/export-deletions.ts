import { Errors } from "@exportsvc/common";
import { buildDeletionsQuery, DELETIONS_HEADER, formIdOfDataset, pendingTombstonesHorizon, tombstoneScope, tombstonesPrunedPast, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportDeletionsResponseSchema, type ExportDeletionsRequest } from "@exportsvc/proto";
import type { ChunkSink } from "../copy-stream";
import { callTraceId, grpcSink } from "@exportsvc/rpc";
import { resolveCursor } from "../cursor-check";
import {
  csvField,
  loadExportableDataset,
  notExportable,
  onOrganizationShare,
  pageHorizonStarter,
  streamCsv,
  withDatabase,
  type DeletionsCall,
  type ExportDependencies,
} from "../pages";
import { checkDeletionsParameters } from "../parameters";

const HEADER = Buffer.from(`${DELETIONS_HEADER.map(csvField).join(",")}\n`, "utf8");

/**
 * ExportService.ExportDeletions: one page of a dataset's deletion feed as CSV bytes (`id`,
 * `deleted_at`, `_cursor`), oldest first. Same dataset lookup, limit, cursor verification, visibility
 * horizon and streaming as the CSV page (export-csv.ts); only the query and the header differ.
 */
export function exportDeletionsHandler(deps: ExportDependencies) {
  return async (request: ExportDeletionsRequest, call: DeletionsCall): Promise<void> => {
    const sink = grpcSink(call, (data) => create(ExportDeletionsResponseSchema, { data }));
    await onOrganizationShare(deps, request.organizationId, sink, () => deletionsPage(deps, request, sink, callTraceId(call.metadata)));
  };
}

async function deletionsPage(deps: ExportDependencies, request: ExportDeletionsRequest, sink: ChunkSink, traceId: string | undefined): Promise<void> {
  const started = process.hrtime.bigint();
  const horizonOf = pageHorizonStarter(deps, request, { readReplica: deps.readReplica, logger: deps.logger });
  const dataset: PageDataset = await loadExportableDataset(deps, request, traceId);
  const params = checkDeletionsParameters(request);
  let after: CursorPosition | undefined;
  if (params.cursor !== undefined) {
    const position = await withDatabase(() => resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor!, "deletions"));
    if (await withDatabase(() => tombstonesPrunedPast(deps.pool, request.organizationId, tombstoneScope(dataset), position.lastModifiedMicros, position.id))) {
      throw Errors.deletionsCursorExpired(dataset.key);
    }
    after = position;
  }
  // The rows' horizon (open transactions; pending changes of a form) holds the feed back too, so a
  // tombstone never overtakes a write still in flight, then the form feed's own rule above.
  const { visibleBeforeMicros: rowsHorizon, source } = await withDatabase(() => horizonOf(formIdOfDataset(dataset)));
  const pending = await withDatabase(() => pendingTombstonesHorizon(deps.pool, request.organizationId, tombstoneScope(dataset)));
  const visibleBeforeMicros = pending !== undefined && pending < rowsHorizon ? pending : rowsHorizon;

  let select: string;
  try {
    select = buildDeletionsQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros }, deps.codec);
  } catch (err) {
    throw notExportable(deps.logger, dataset.key, err, traceId);
  }
  const outcome = await streamCsv(deps, { source, select, header: HEADER, sink, dataset, organizationId: request.organizationId, traceId, what: "deletions" });
  deps.logger.info(
    {
      organizationId: request.organizationId,
      dataset: dataset.key,
      feed: "deletions",
      rows: outcome.rows,
      bytes: outcome.bytes,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    },
    "deletions page",
  );
}
