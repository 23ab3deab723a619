import { Errors } from "@exportsvc/common";
import { buildRewritesQuery, rewriteKinds, rewritesPrunedPast, siteNameLookup, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportRewritesResponseSchema, type ExportRewritesRequest } from "@exportsvc/proto";
import type { ChunkSink } from "../copy-stream";
import { callTraceId, grpcSink } from "@exportsvc/rpc";
import { resolveCursor } from "../cursor-check";
import {
  csvHeader,
  loadExportableDataset,
  notExportable,
  onOrganizationShare,
  streamCsv,
  withDatabase,
  type ExportDependencies,
  type RewritesCall,
} from "../pages";
import { checkDeletionsParameters } from "../parameters";
import { visibilityHorizon } from "../visibility";

/**
 * ExportService.ExportRewrites: one page of a dataset's rewrite feed as CSV bytes (the dataset's own
 * columns and `_cursor`), the rows rewritten since the cursor with their current text, in rewrite
 * order. Same dataset lookup, limit, cursor verification, visibility horizon and streaming as the
 * CSV page (export-csv.ts) and the deletion feed (export-deletions.ts).
 */
export function exportRewritesHandler(deps: ExportDependencies) {
  return async (request: ExportRewritesRequest, call: RewritesCall): Promise<void> => {
    const sink = grpcSink(call, (data) => create(ExportRewritesResponseSchema, { data }));
    await onOrganizationShare(deps, request.organizationId, sink, () => rewritesPage(deps, request, sink, callTraceId(call.metadata)));
  };
}

async function rewritesPage(deps: ExportDependencies, request: ExportRewritesRequest, sink: ChunkSink, traceId: string | undefined): Promise<void> {
  const started = process.hrtime.bigint();
  const dataset: PageDataset = await loadExportableDataset(deps, request, traceId);
  const params = checkDeletionsParameters(request);
  let after: CursorPosition | undefined;
  if (params.cursor !== undefined) {
    const position = await withDatabase(() => resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor!, "rewrites"));
    if (await withDatabase(() => rewritesPrunedPast(deps.pool, request.organizationId, rewriteKinds(dataset), position.lastModifiedMicros, position.rowIndex === 1))) {
      throw Errors.rewritesCursorExpired(dataset.key);
    }
    after = position;
  }
  // The session part of the rows' horizon (open transactions) holds the feed back: an entry is
  // written with the change that rewrote the row, stamped after its transaction began, so a held
  // cursor never skips an entry that commits late. Not a form's pending part: that holds rows until
  // they are materialized, and a quiet form's pending floor stays where it was; the feed serves the
  // text its rows have now, never older than what the CSV endpoint served.
  const { visibleBeforeMicros, source } = await withDatabase(() => visibilityHorizon(deps.pool, request.organizationId, null, { readReplica: deps.readReplica, logger: deps.logger }));
  const siteNames = dataset.kind === "submission" ? siteNameLookup(deps.siteCounts?.get(request.organizationId), params.limit) : undefined;

  let select: string;
  try {
    select = buildRewritesQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros, ...(siteNames ? { siteNames } : {}) }, deps.codec);
  } catch (err) {
    throw notExportable(deps.logger, dataset.key, err, traceId);
  }
  const outcome = await streamCsv(deps, { source, select, header: csvHeader(dataset), sink, dataset, organizationId: request.organizationId, traceId, what: "rewrites" });
  deps.logger.info(
    { organizationId: request.organizationId, dataset: dataset.key, feed: "rewrites", rows: outcome.rows, bytes: outcome.bytes, ms: Number(process.hrtime.bigint() - started) / 1e6 },
    "rewrites page",
  );
}
