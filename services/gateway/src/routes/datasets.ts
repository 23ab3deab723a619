import Router from "@koa/router";
import type { Middleware, ParameterizedContext } from "koa";
import type { Guard } from "../http/access-control";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ExportCsvRequestSchema, ExportDeletionsRequestSchema, ExportRewritesRequestSchema } from "@exportsvc/proto";
import { Errors, ifNoneMatchHits, type Logger } from "@exportsvc/common";
import type { Principal } from "../contracts";
import { sendListing, sendListingNotModified, type ListingStream } from "../http/listing-response";
import { settledEtagHolds, type ListingCache, type OrganizationListingState } from "@exportsvc/datasets";
import { parseCsvQuery } from "../csv/query";
import { decodeComponentStrictly } from "../http/text-input";
import { sendCsvStream, type CsvChunkStream, type CsvStreamOptions } from "../csv/stream-response";
import { requireStreamFramingMiddleware } from "../http/http-version";
import type { GatewayMetrics } from "../metrics";

/** The slice of the catalog client the gateway uses (a fake in tests). */
export interface CatalogPort {
  /** `traceId` travels as the call's traceparent, so the catalog's logs carry the request's trace id. */
  listDatasets(request: { organizationId: string; ifNoneMatch?: string }, traceId?: string): ListingStream;
}

/** The slice of the export client the gateway uses (a fake in tests). */
export interface ExportPort {
  exportCsv(request: MessageInitShape<typeof ExportCsvRequestSchema>, traceId?: string): CsvChunkStream;
  exportDeletions(request: MessageInitShape<typeof ExportDeletionsRequestSchema>, traceId?: string): CsvChunkStream;
  exportRewrites(request: MessageInitShape<typeof ExportRewritesRequestSchema>, traceId?: string): CsvChunkStream;
}

export interface DataRouteDeps {
  catalog: CatalogPort;
  exporter: ExportPort;
  /** Runs before every data handler: authenticate, then rate limit (the listing starts its 304 check between the two). */
  guard: Guard;
  gzipLevel: number;
  csvHeadBytes: number;
  /** CATALOG_DEADLINE_MS: the catalog has this long to build the listing (send its head). */
  catalogDeadlineMs: number;
  /** A CSV or listing response the client accepts no bytes of for this long is aborted (slot and call freed). */
  streamStallTimeoutMs: number;
  logger: Logger;
  metrics?: GatewayMetrics;
  /**
   * The cheap 304 in the gateway (docs/catalog.md, "A cheap 304"): the settled listing versions the
   * catalog reported (per replica, verdicts only) and the statement that says whether one still holds.
   */
  settledListings?: { cache: ListingCache; state: (organizationId: string) => Promise<OrganizationListingState> };
}

/** The data endpoints: the listing, one dataset's CSV page and one page of its deletion or rewrite feed. */
export function dataRoutes(deps: DataRouteDeps): Router {
  // Paths are matched exactly as written: /V1/datasets/x/CSV is no endpoint (404 NOT_FOUND).
  const router = new Router({ prefix: "/v1", sensitive: true });

  const { authenticate, rateLimit } = deps.guard;
  router.get("/datasets", authenticate, startSettledCheck(deps), rateLimit, async (ctx) => {
    const principal = ctx.state.principal as Principal;
    const ifNoneMatch = ctx.get("if-none-match");
    // Started before admission, or now when the guard did not let it start early.
    const settledEtag = await ((ctx.state.settledCheck as SettledCheck | undefined) ?? settledCheck(deps, ctx));
    if (settledEtag !== undefined) {
      deps.metrics?.recordListingNotModified("gateway");
      sendListingNotModified(ctx, settledEtag);
      return;
    }
    // With If-None-Match the catalog may answer notModified from the organization's stored listing
    // version without building the listing (docs/catalog.md, "A cheap 304").
    const call = deps.catalog.listDatasets(
      ifNoneMatch ? { organizationId: principal.organizationId, ifNoneMatch } : { organizationId: principal.organizationId },
      ctx.state.traceId as string,
    );
    await sendListing(ctx, call, {
      ...csvStreamOptions(deps),
      ifNoneMatch,
      headDeadlineMs: deps.catalogDeadlineMs,
      onHead: (head) => {
        if (head.settledVersion !== undefined) deps.settledListings?.cache.set(principal.organizationId, head.settledVersion, head.etag);
      },
    });
    if (ctx.status === 304) deps.metrics?.recordListingNotModified("catalog");
  });

  router.get("/datasets/:datasetKey/csv", requireStreamFramingMiddleware(), authenticate, rateLimit, async (ctx) => {
    // Parsing comes first: an unparsable parameter is rejected before the dataset is looked at.
    const query = parseCsvQuery(ctx.query, ctx.querystring);
    const request: MessageInitShape<typeof ExportCsvRequestSchema> = {
      organizationId: (ctx.state.principal as Principal).organizationId,
      datasetKey: datasetKeyOf(ctx),
      ...query,
    };
    await sendCsvStream(ctx, deps.exporter.exportCsv(request, ctx.state.traceId as string), csvStreamOptions(deps));
  });

  // The feeds beside the rows (deletions, rewrites) take the CSV endpoint's parsing of the two
  // parameters they take; its other parameters are unknown here and, like every unknown parameter,
  // ignored (but invalid text in any is refused).
  const feedRequest = (ctx: ParameterizedContext) => {
    const { cursor, limit } = parseCsvQuery({ cursor: ctx.query.cursor, limit: ctx.query.limit }, ctx.querystring);
    return { organizationId: (ctx.state.principal as Principal).organizationId, datasetKey: datasetKeyOf(ctx), cursor, limit };
  };
  router.get("/datasets/:datasetKey/deletions", requireStreamFramingMiddleware(), authenticate, rateLimit, async (ctx) => {
    await sendCsvStream(ctx, deps.exporter.exportDeletions(feedRequest(ctx), ctx.state.traceId as string), csvStreamOptions(deps));
  });
  router.get("/datasets/:datasetKey/rewrites", requireStreamFramingMiddleware(), authenticate, rateLimit, async (ctx) => {
    await sendCsvStream(ctx, deps.exporter.exportRewrites(feedRequest(ctx), ctx.state.traceId as string), csvStreamOptions(deps));
  });

  return router;
}

/** The gateway's own 304 decision for one request: the ETag to answer 304 with, or undefined (never rejects). */
type SettledCheck = Promise<string | undefined>;

/**
 * Starts the cheap 304's check (stillSettledEtag) before the request is admitted, so its statement's
 * round trip to the primary runs beside the rate limiter's to the shared store: a 304 then costs
 * the longer of the two, not their sum. The guard decides whether it may start early
 * (Guard.beforeAdmission: not for an organization refused within its last Retry-After, nor beyond a
 * couple in flight per organization); otherwise the handler runs it after admission, as before.
 * Reading the state before admission is still reading it after the request arrived, so the 304
 * promises what it did.
 */
function startSettledCheck(deps: DataRouteDeps): Middleware {
  return async (ctx, next) => {
    if (deps.settledListings && ctx.get("if-none-match")) {
      ctx.state.settledCheck = deps.guard.beforeAdmission((ctx.state.principal as Principal).organizationId, () => settledCheck(deps, ctx));
    }
    await next();
  };
}

/** The request's SettledCheck: undefined at once without If-None-Match or remembered verdicts. */
function settledCheck(deps: DataRouteDeps, ctx: ParameterizedContext): SettledCheck {
  const settled = deps.settledListings;
  const ifNoneMatch = ctx.get("if-none-match");
  if (!settled || !ifNoneMatch) return Promise.resolve(undefined);
  return stillSettledEtag(settled, (ctx.state.principal as Principal).organizationId, ifNoneMatch, deps.logger);
}

/**
 * The ETag to answer 304 with, when If-None-Match names the ETag the catalog reported settled at a
 * listing version and that version still holds (settledEtagHolds: one statement on the primary).
 * Undefined for anything else, a failing statement included: the catalog answers (or maps the
 * failure) as always.
 */
async function stillSettledEtag(
  settled: NonNullable<DataRouteDeps["settledListings"]>,
  organizationId: string,
  ifNoneMatch: string,
  logger: Logger,
): Promise<string | undefined> {
  const known = settled.cache.latest(organizationId);
  if (!known || !ifNoneMatchHits(ifNoneMatch, known.etag)) return undefined;
  try {
    return settledEtagHolds(await settled.state(organizationId), known.version) ? known.etag : undefined;
  } catch (err) {
    logger.warn({ err: (err as Error).message }, "listing state unreadable; the catalog answers");
    return undefined;
  }
}

/** The path's dataset key; a key that is not valid text names no dataset: answered here, never sent to the database. */
function datasetKeyOf(ctx: ParameterizedContext): string {
  const rawKey = ctx.path.split("/")[3] ?? "";
  const datasetKey = decodeComponentStrictly(rawKey);
  if (datasetKey === undefined) throw Errors.datasetNotFound(ctx.params.datasetKey);
  return datasetKey;
}

function csvStreamOptions(deps: DataRouteDeps): CsvStreamOptions {
  return {
    headBytes: deps.csvHeadBytes,
    gzipLevel: deps.gzipLevel,
    stallTimeoutMs: deps.streamStallTimeoutMs,
    logger: deps.logger,
    metrics: deps.metrics,
  };
}
