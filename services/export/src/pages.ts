import type { Pool } from "pg";
import { AppError, Errors, type Logger } from "@exportsvc/common";
import { isDatabaseUnavailable, ShareWaitTimeout, type ConnectionShares } from "@exportsvc/db";
import {
  loadCurrentRegistryEntry,
  headerFields,
  loadRegistryEntry,
  UnsupportedDatasetError,
  type CursorCodec,
  type PageDataset,
  type RegistryEntry,
} from "@exportsvc/datasets";
import type { ExportCsvRequest } from "@exportsvc/proto";
import { callTraceId, grpcSink, type grpc } from "@exportsvc/rpc";
import { copyToSink, StreamFailedAfterFirstChunk, StreamStalled, type ChunkSink, type CopyOutcome, type CopyStatement } from "./copy-stream";
import type { ExportMetrics } from "./metrics";
import type { SiteCounts } from "./site-counts";
import { startHorizon, visibilityHorizon, type FormIdHints, type HorizonOptions, type ReadReplicaPool } from "./visibility";

/*
 * The page machinery every feed of a dataset shares (CSV pages, the deletion and the rewrite feed):
 * the service's dependencies, the handler every feed's page runs in (feedHandler: the organization's
 * share of the pool, loading an exportable dataset, streaming a COPY to the caller, the page's log
 * line) and mapping what fails to the service's errors. Each feed (handlers/) plans its own query,
 * header and horizon on top of it.
 */

export interface ExportDependencies {
  pool: Pool;
  codec: CursorCodec;
  logger: Logger;
  /** The schema service's SyncDatasets (registry read-your-writes); undefined when not configured. */
  syncRegistry?: (organizationId: string) => Promise<void>;
  chunkBytes: number;
  /** Per-organization shares of the pool; a call holds one from its first query to its last byte. */
  shares: ConnectionShares;
  /** A consumer that accepts nothing for this long aborts the page; also the longest wait for a share. */
  stallTimeoutMs: number;
  metrics?: ExportMetrics;
  /** DATABASE_READ_URL: pages are read from this hot standby once it has caught up (docs/export.md). */
  readReplica?: ReadReplicaPool;
  /** The form of each key's last page, to start the next page's horizon early; undefined: never early. */
  formIdHints?: FormIdHints;
  /** Organizations' site counts, choosing how submission pages read site names; undefined: always the join. */
  siteCounts?: SiteCounts;
}

/** What every feed's request names: the organization and the dataset. */
export type PageRequest = Pick<ExportCsvRequest, "organizationId" | "datasetKey">;

/** A dataset a page may be read from (loadExportableDataset). */
export type ExportableDataset = PageDataset & RegistryEntry;

/** What a feed makes of one request once its dataset is loaded. */
export interface PagePlan {
  /** The pool the page is read from: the primary, or the read replica once it has caught up. */
  source: Pool;
  /**
   * Builds the page's statement; what it throws means the dataset cannot be exported (notExportable).
   * One planned on a rendered dataset's state says how to plan again should it not hold (CopyStatement).
   */
  statement(): CopyStatement;
  header: Buffer;
  /** What the page's log line adds (the feed, the site names' lookup). */
  logFields?: Record<string, unknown>;
  /** The streamed page's outcome, for the feed's own metrics. */
  streamed?(outcome: CopyOutcome): void;
}

/**
 * A feed's page: given the request before its dataset is loaded (so it can start work early, as the
 * horizon), it plans the page for the loaded dataset.
 */
export type PagePlanner<Request extends PageRequest> = (request: Request) => (dataset: ExportableDataset) => Promise<PagePlan>;

/**
 * The gRPC handler of a feed (ExportCsv, ExportDeletions, ExportRewrites): on the organization's
 * share of the pool, its dataset loaded, the feed's page is COPYed to the call as `message`s of
 * CSV bytes and logged as one "<what> page" line. What fails is the service's errors (streamCsv,
 * notExportable; serve's policy for the database out of reach).
 */
export function feedHandler<Request extends PageRequest, Response>(deps: ExportDependencies, what: string, message: (data: Buffer) => Response, planner: PagePlanner<Request>) {
  return async (request: Request, call: grpc.ServerWritableStream<Request, Response>): Promise<void> => {
    const sink = grpcSink(call, message);
    const traceId = callTraceId(call.metadata);
    await onOrganizationShare(deps, request.organizationId, sink, async () => {
      const started = process.hrtime.bigint();
      const planFor = planner(request);
      const dataset = await loadExportableDataset(deps, request, traceId);
      const plan = await planFor(dataset);
      let statement: CopyStatement;
      try {
        statement = plan.statement();
      } catch (err) {
        throw notExportable(deps.logger, dataset.key, err, traceId);
      }
      const { organizationId } = request;
      const outcome = await streamCsv(deps, { source: plan.source, statement, header: plan.header, sink, dataset, organizationId, traceId, what });
      plan.streamed?.(outcome);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      deps.logger.info({ organizationId, dataset: dataset.key, ...plan.logFields, bytes: outcome.bytes, rows: outcome.rows, cancelled: outcome.cancelled, ms }, `${what} page`);
    });
  };
}

/**
 * The export service waits this much longer than STREAM_STALL_TIMEOUT_MS for its gRPC consumer: the
 * gateway, which sees the HTTP client, starts its own timer first and should be the one to end a
 * stalled page (counted as `stalled`, not as an upstream error); this timeout covers a consumer that
 * stopped reading by itself.
 */
export const CONSUMER_STALL_MARGIN_MS = 5_000;

/**
 * Runs one call on its organization's share of the pool, from its first query to its last byte:
 * connections held by one organization's (slow) pages never starve another organization's.
 */
async function onOrganizationShare(deps: ExportDependencies, organizationId: string, sink: ChunkSink, work: () => Promise<void>): Promise<void> {
  const share = await acquireShare(deps, organizationId, sink);
  try {
    await work();
  } finally {
    share.release();
  }
}

async function acquireShare(deps: ExportDependencies, organizationId: string, sink: ChunkSink) {
  try {
    return await deps.shares.acquire(organizationId, { timeoutMs: deps.stallTimeoutMs, abandoned: sink.gone });
  } catch (err) {
    if (err instanceof ShareWaitTimeout) {
      deps.logger.warn({ organizationId, waitedMs: err.waitedMs, shares: deps.shares.status() }, "no database connection share became free");
      throw Errors.databaseUnavailable(
        "No database connection became free for this organization in time (its other exports hold its share). Retry with exponential backoff.",
      );
    }
    // ShareWaitAbandoned: the caller is gone, nobody reads the answer.
    throw err;
  }
}

interface CsvStreamTarget {
  /** The pool the page is read from: the primary, or the read replica once it has caught up. */
  source: Pool;
  statement: CopyStatement;
  header: Buffer;
  sink: ChunkSink;
  dataset: PageDataset;
  organizationId: string;
  traceId: string | undefined;
  /** What the page is, for log lines ("export", "deletions"). */
  what: string;
}

/**
 * COPYs one page to the sink under the stall rules and maps what can go wrong after the first byte
 * (a stalled consumer, a failure mid-stream) and before it (database down, a value that cannot be
 * rendered) to the service's errors. Shared by every CSV-shaped feed of a dataset.
 */
async function streamCsv(deps: ExportDependencies, target: CsvStreamTarget): Promise<CopyOutcome> {
  const { source, statement, header, sink, dataset, organizationId, traceId, what } = target;
  try {
    const outcome = await copyToSink(source, statement, header, sink, { chunkBytes: deps.chunkBytes, stallTimeoutMs: deps.stallTimeoutMs + CONSUMER_STALL_MARGIN_MS });
    if (outcome.cancelled) deps.metrics?.recordStreamAbort("client_disconnect");
    return outcome;
  } catch (err) {
    if (err instanceof StreamStalled) {
      deps.metrics?.recordStreamAbort("stalled");
      deps.logger.warn(
        { traceId, dataset: dataset.key, organizationId, bytes: err.bytes, stalledMs: err.stalledMs },
        `${what} consumer accepted no bytes for the stall timeout: page aborted, connection freed`,
      );
      throw Errors.internal();
    }
    if (err instanceof StreamFailedAfterFirstChunk) {
      deps.metrics?.recordStreamAbort(isDatabaseUnavailable(err.cause) ? "upstream_error" : "render_error");
      deps.logger.error({ err: err.cause, traceId, dataset: dataset.key, organizationId }, `${what} failed mid-stream`);
      throw Errors.internal();
    }
    if (isDatabaseUnavailable(err)) throw Errors.databaseUnavailable();
    throw notExportable(deps.logger, dataset.key, err, traceId);
  }
}

/**
 * The page's horizon, started with its registry read when an earlier page named the key's form
 * (startHorizon): call the result with the form the registry names.
 */
export function pageHorizonStarter(deps: ExportDependencies, request: PageRequest, opts: HorizonOptions) {
  return startHorizon((formId) => visibilityHorizon(deps.pool, request.organizationId, formId, opts), deps.formIdHints, request.organizationId, request.datasetKey);
}

async function loadExportableDataset(deps: ExportDependencies, request: PageRequest, traceId: string | undefined): Promise<ExportableDataset> {
  // PostgreSQL cannot take a NUL in text: such a key names no dataset (the gateway refuses it too).
  if (request.datasetKey.includes("\u0000")) throw Errors.datasetNotFound(request.datasetKey);
  const entry = deps.syncRegistry
    ? await loadCurrentRegistryEntry(deps.pool, request.organizationId, request.datasetKey, deps.syncRegistry)
    : await loadRegistryEntry(deps.pool, request.organizationId, request.datasetKey);
  if (!entry) throw Errors.datasetNotFound(request.datasetKey);
  if (entry.state === "failed") {
    // The recorded cause (a rebuild's message, possibly the database's text) is for operators: the
    // log and `exportctl`, never the problem body.
    deps.logger.warn({ traceId, organizationId: request.organizationId, dataset: entry.key, cause: entry.error }, "export refused: dataset out of date");
    throw Errors.datasetNotExportable(
      `Dataset '${entry.key}' is out of date on the server side and cannot be exported right now. Other datasets are not affected; republishing the form can clear it, otherwise contact support naming the dataset.`,
    );
  }
  return entry;
}

/** A query that fails on the data itself: the page cannot be rendered (docs/contract.md §10: 503 DATASET_NOT_EXPORTABLE). */
function notExportable(logger: Logger, datasetKey: string, err: unknown, traceId: string | undefined): AppError {
  if (err instanceof AppError) return err;
  logger.error({ err, traceId, dataset: datasetKey }, "export query failed");
  const reason = err instanceof UnsupportedDatasetError ? "its definition cannot be exported" : "a stored value cannot be exported";
  return Errors.datasetNotExportable(`Dataset '${datasetKey}' cannot be exported: ${reason}. Other datasets are not affected; contact support naming the dataset.`);
}

/** The header row of a page of the dataset's rows (CSV page, rewrite feed): its column keys, then `_cursor`. */
export const csvHeader = (dataset: PageDataset): Buffer => Buffer.from(`${headerFields(dataset).map(csvField).join(",")}\n`, "utf8");

/** RFC 4180 quoting for the header row (column keys are identifiers, so this rarely quotes). */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) || value === "" ? `"${value.replace(/"/g, '""')}"` : value;
}

