import { once } from "node:events";
import type { Pool } from "pg";
import { AppError, Errors, type Logger, type ServiceMetrics } from "@exportsvc/common";
import { isDatabaseUnavailable } from "@exportsvc/db";
import {
  buildPageQuery,
  ensureRegistryCurrent,
  headerFields,
  loadRegistryEntry,
  UnsupportedDatasetError,
  type CursorCodec,
  type CursorPosition,
  type PageDataset,
  type RegistryEntry,
} from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, type ExportCsvRequest, type ExportCsvResponse } from "@exportsvc/proto";
import type { grpc } from "@exportsvc/rpc";
import { copyToSink, StreamFailedAfterFirstChunk, type ChunkSink } from "./copy-stream";
import { resolveCursor } from "./cursor-check";
import { checkParameters } from "./parameters";
import { visibilityHorizon } from "./visibility";

export interface ExportDependencies {
  pool: Pool;
  codec: CursorCodec;
  logger: Logger;
  /** The schema service's SyncDatasets (registry read-your-writes); undefined when not configured. */
  syncRegistry?: (organizationId: string) => Promise<void>;
  chunkBytes: number;
  metrics?: ServiceMetrics;
}

type ExportCall = grpc.ServerWritableStream<ExportCsvRequest, ExportCsvResponse>;

/** ExportService.ExportCsv: one dataset page as CSV bytes (header row, rows, `_cursor` last). */
export function exportCsvHandler(deps: ExportDependencies) {
  return async (request: ExportCsvRequest, call: ExportCall): Promise<void> => {
    const started = process.hrtime.bigint();
    const dataset = await loadExportableDataset(deps, request);
    const params = checkParameters(request, dataset);
    const after: CursorPosition | undefined = params.cursor !== undefined
      ? await withDatabase(() => resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor!))
      : params.original;
    const visibleBeforeMicros = await withDatabase(() => visibilityHorizon(deps.pool, request.organizationId, dataset));
    deps.metrics?.observeVisibilityHorizonLag(Date.now() / 1000 - Number(visibleBeforeMicros) / 1e6);

    let select: string;
    try {
      select = buildPageQuery(
        dataset,
        {
          organizationId: request.organizationId,
          limit: params.limit,
          after,
          completedFromMicros: params.completedFromMicros,
          completedToMicros: params.completedToMicros,
          visibleBeforeMicros,
        },
        deps.codec,
      );
    } catch (err) {
      throw notExportable(deps.logger, dataset.key, err);
    }

    const header = Buffer.from(`${headerFields(dataset).map(csvField).join(",")}\n`, "utf8");
    try {
      const outcome = await copyToSink(deps.pool, select, header, grpcSink(call), deps.chunkBytes);
      deps.metrics?.recordExport(dataset.kind, outcome.rows, outcome.bytes);
      if (outcome.cancelled) deps.metrics?.recordStreamAbort("client_disconnect");
      deps.logger.info(
        {
          organizationId: request.organizationId,
          dataset: dataset.key,
          bytes: outcome.bytes,
          rows: outcome.rows,
          cancelled: outcome.cancelled,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        "export page",
      );
    } catch (err) {
      if (err instanceof StreamFailedAfterFirstChunk) {
        deps.metrics?.recordStreamAbort(isDatabaseUnavailable(err.cause) ? "upstream_error" : "render_error");
        deps.logger.error({ err: err.cause, dataset: dataset.key, organizationId: request.organizationId }, "export failed mid-stream");
        throw Errors.internal();
      }
      if (isDatabaseUnavailable(err)) throw Errors.databaseUnavailable();
      throw notExportable(deps.logger, dataset.key, err);
    }
  };
}

async function loadExportableDataset(deps: ExportDependencies, request: ExportCsvRequest): Promise<PageDataset & RegistryEntry> {
  const entry = await withDatabase(async () => {
    if (deps.syncRegistry) await ensureRegistryCurrent(deps.pool, request.organizationId, deps.syncRegistry);
    return loadRegistryEntry(deps.pool, request.organizationId, request.datasetKey);
  });
  if (!entry) throw Errors.datasetNotFound(request.datasetKey);
  if (entry.state === "failed") {
    throw Errors.datasetNotExportable(
      `Dataset '${entry.key}' is out of date on the server side and cannot be exported right now${entry.error ? ` (${entry.error})` : ""}. Other datasets are not affected.`,
    );
  }
  return entry;
}

/** Runs a database step; an unreachable database is DATABASE_UNAVAILABLE, AppErrors pass through. */
async function withDatabase<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (isDatabaseUnavailable(err)) throw Errors.databaseUnavailable();
    throw err;
  }
}

/** A query that fails on the data itself: the page cannot be rendered (spec: 503 DATASET_NOT_EXPORTABLE). */
function notExportable(logger: Logger, datasetKey: string, err: unknown): AppError {
  if (err instanceof AppError) return err;
  logger.error({ err, dataset: datasetKey }, "export query failed");
  const reason = err instanceof UnsupportedDatasetError ? "its definition cannot be exported" : "a stored value cannot be exported";
  return Errors.datasetNotExportable(`Dataset '${datasetKey}' cannot be exported: ${reason}. Other datasets are not affected; contact support naming the dataset.`);
}

/** RFC 4180 quoting for the header row (column keys are identifiers, so this rarely quotes). */
function csvField(value: string): string {
  return /[",\r\n]/.test(value) || value === "" ? `"${value.replace(/"/g, '""')}"` : value;
}

function grpcSink(call: ExportCall): ChunkSink {
  let gone = false;
  const goneSignal = new Promise<void>((resolve) => {
    const mark = () => {
      gone = true;
      resolve();
    };
    if (call.cancelled) mark();
    call.once("cancelled", mark);
    call.once("close", mark);
    call.once("error", mark);
  });
  return {
    write: (chunk) => call.write(create(ExportCsvResponseSchema, { data: chunk })),
    drained: async () => {
      await once(call, "drain");
    },
    gone: goneSignal,
    isGone: () => gone || call.cancelled,
  };
}
