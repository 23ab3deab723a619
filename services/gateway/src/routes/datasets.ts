import Router from "@koa/router";
import type { Middleware } from "koa";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DatasetEntry, ExportCsvRequestSchema, ListDatasetsResponse } from "@exportsvc/proto";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import type { Principal } from "../contracts";
import { sendJson } from "../http/json";
import { parseCsvQuery } from "../csv/query";
import { sendCsvStream, type CsvChunkStream } from "../csv/stream-response";

/** The slice of the catalog client the gateway uses (a fake in tests). */
export interface CatalogPort {
  listDatasets(request: { organizationId: string }): Promise<ListDatasetsResponse>;
}

/** The slice of the export client the gateway uses (a fake in tests). */
export interface ExportPort {
  exportCsv(request: MessageInitShape<typeof ExportCsvRequestSchema>): CsvChunkStream;
}

export interface DataRouteDeps {
  catalog: CatalogPort;
  exporter: ExportPort;
  /** Runs before every data handler: authenticate, then rate limit. */
  guard: Middleware[];
  gzipLevel: number;
  csvHeadBytes: number;
  logger: Logger;
  metrics?: ServiceMetrics;
}

/** A listing entry as the API shows it: absent values omitted, never null. */
export function toListingEntry(entry: DatasetEntry): Record<string, unknown> {
  const out: Record<string, unknown> = { key: entry.key };
  if (entry.displayName !== undefined) out.displayName = entry.displayName;
  if (entry.parentDataset !== undefined) out.parentDataset = entry.parentDataset;
  out.childDatasets = [...entry.childDatasets];
  out.columns = entry.columns.map((column) =>
    column.label === undefined
      ? { key: column.key, dataType: column.dataType }
      : { key: column.key, dataType: column.dataType, label: column.label },
  );
  out.links = { csv: entry.csvPath };
  out.changeToken = entry.changeToken;
  return out;
}

/** RFC 9110 weak comparison of an If-None-Match header against the current ETag. */
export function ifNoneMatchHits(header: string, etag: string): boolean {
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  if (header.trim() === "*") return true;
  return header.split(",").some((candidate) => opaque(candidate) === opaque(etag));
}

/** The two data endpoints: the listing and one dataset's CSV page. */
export function dataRoutes(deps: DataRouteDeps): Router {
  const router = new Router({ prefix: "/v1" });

  router.get("/datasets", ...deps.guard, async (ctx) => {
    const principal = ctx.state.principal as Principal;
    const listing = await deps.catalog.listDatasets({ organizationId: principal.organizationId });
    ctx.set("ETag", listing.etag);
    ctx.set("Cache-Control", "private, no-cache");
    ctx.vary("Accept-Encoding");
    const ifNoneMatch = ctx.get("if-none-match");
    if (ifNoneMatch && listing.etag && ifNoneMatchHits(ifNoneMatch, listing.etag)) {
      ctx.status = 304;
      return;
    }
    await sendJson(ctx, listing.datasets.map(toListingEntry), deps.gzipLevel);
  });

  router.get("/datasets/:datasetKey/csv", ...deps.guard, async (ctx) => {
    // Parsing comes first: an unparsable parameter is rejected before the dataset is looked at.
    const query = parseCsvQuery(ctx.query);
    const principal = ctx.state.principal as Principal;
    const request: MessageInitShape<typeof ExportCsvRequestSchema> = {
      organizationId: principal.organizationId,
      datasetKey: ctx.params.datasetKey,
      ...query,
    };
    const call = deps.exporter.exportCsv(request);
    await sendCsvStream(ctx, call, {
      headBytes: deps.csvHeadBytes,
      gzipLevel: deps.gzipLevel,
      logger: deps.logger,
      metrics: deps.metrics,
    });
  });

  return router;
}
