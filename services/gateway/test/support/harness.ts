import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import pino from "pino";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { CatalogService, ExportService, ListDatasetsResponseSchema, type ExportCsvRequest, type ListDatasetsRequest } from "@exportsvc/proto";
import { addService, createClient, grpc, listen, shutdown, traceMetadata } from "@exportsvc/rpc";
import { AppError } from "@exportsvc/common";
import { createApp, type AppDependencies } from "../../src/app";
import { createHttpServer, DEFAULT_HTTP_LIMITS, type HttpServerLimits } from "../../src/http/server";
import type { Admission, Authenticator, Principal, RateLimiter } from "../../src/contracts";

export const GOOD_KEY = "ak_goodgoodgoodgoodgoodgoodgoodgoodgoodgood";
export const ORGANIZATION_ID = "5b0c2f0e-8e3a-4c55-9d6a-0c3c1e1f7a11";

/** Accepts GOOD_KEY; any other credential gets the error the test chose (401 by default). */
export class FakeAuthenticator implements Authenticator {
  failure: () => AppError = () => new AppError({ status: 401, errorCode: "UNAUTHORIZED", title: "Unauthorized", detail: "should never be shown" });
  calls = 0;
  async authenticate(header: string | undefined): Promise<Principal> {
    this.calls++;
    if (header === `Bearer ${GOOD_KEY}`) return { organizationId: ORGANIZATION_ID, keyId: "ak_keyid" };
    throw this.failure();
  }
}

/** Counts admissions and releases; `reject` makes the next admissions fail with that error. */
export class FakeRateLimiter implements RateLimiter {
  admitted = 0;
  released = 0;
  reject?: AppError;
  /** When set, admission waits for it (to see what runs while a request is being admitted). */
  gate?: Promise<void>;
  get inFlight(): number {
    return this.admitted - this.released;
  }
  async admit(): Promise<Admission> {
    if (this.gate) await this.gate;
    if (this.reject) throw this.reject;
    this.admitted++;
    let done = false;
    return {
      release: () => {
        if (done) return;
        done = true;
        this.released++;
      },
    };
  }
}

export type ExportBehaviour = (request: ExportCsvRequest, call: grpc.ServerWritableStream<ExportCsvRequest, unknown>) => Promise<void>;

/** Writes a chunk honouring gRPC flow control (waits for drain), as the real export service must. */
export async function writeChunk(call: grpc.ServerWritableStream<ExportCsvRequest, unknown>, data: Uint8Array): Promise<void> {
  if (!call.write({ data })) await new Promise<void>((resolve) => call.once("drain", resolve));
}

/** `size` bytes of CSV-looking rows. */
export function csvBytes(size: number, line = "row,abcdefghijklmnopqrstuvwxyz0123456789\n"): Buffer {
  return Buffer.from(line.repeat(Math.ceil(size / line.length)).slice(0, size));
}

/**
 * What the fake catalog streams: the head, then `datasets` (API-shaped entries, rendered with
 * JSON.stringify as the catalog renders them) in pieces of `entriesPerPiece`; with `failAfterEntries`
 * the call fails (with `failure`, default a 500) once that many entries were sent.
 */
export interface FakeListing {
  datasets: unknown[];
  etag: string;
  notModified?: boolean;
  /** Sent in the head: the ETag is this listing version's settled ETag. */
  settledVersion?: string;
  entriesPerPiece?: number;
  failAfterEntries?: number;
  failure?: AppError;
}

export interface Harness {
  url: string;
  authenticator: FakeAuthenticator;
  rateLimiter: FakeRateLimiter;
  /** Requests the fake export service received. */
  exportRequests: ExportCsvRequest[];
  /** The `traceparent` metadata of each export call. */
  exportTraceparents: (string | undefined)[];
  listRequests: ListDatasetsRequest[];
  /** Export calls the client cancelled. */
  cancelledExports: number;
  exportBehaviours: Map<string, ExportBehaviour>;
  catalogResponse: () => Promise<FakeListing>;
  logs: string[];
  close(): Promise<void>;
}

export interface HarnessOptions {
  probeDatabase?: AppDependencies["probeDatabase"];
  /** Points the export client at an address where nothing listens. */
  exportAddress?: string;
  catalogAddress?: string;
  metrics?: AppDependencies["metrics"];
  /** Connection cap and timeouts of the listener (default: the gateway's defaults). */
  http?: Partial<HttpServerLimits>;
  streamStallTimeoutMs?: number;
  catalogDeadlineMs?: number;
  settledListings?: AppDependencies["settledListings"];
}

/** The gateway app in process, with real grpc-js servers running fake catalog/export handlers. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const logs: string[] = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk, _enc, cb) {
        logs.push(String(chunk));
        cb();
      },
    }),
  );
  const harness = {
    authenticator: new FakeAuthenticator(),
    rateLimiter: new FakeRateLimiter(),
    exportRequests: [] as ExportCsvRequest[],
    exportTraceparents: [] as (string | undefined)[],
    listRequests: [] as ListDatasetsRequest[],
    cancelledExports: 0,
    exportBehaviours: new Map<string, ExportBehaviour>(),
    catalogResponse: async () => ({ datasets: [] as unknown[], etag: '"empty"' }),
    logs,
  } as Harness;

  const services = await startFakeServices(harness);
  const grpcPort = services.port;
  const catalog = createClient(CatalogService, options.catalogAddress ?? `127.0.0.1:${grpcPort}`);
  const exporter = createClient(ExportService, options.exportAddress ?? `127.0.0.1:${grpcPort}`);

  const app = createApp({
    authenticator: harness.authenticator,
    rateLimiter: harness.rateLimiter,
    catalog: { listDatasets: (request, traceId) => catalog.listDatasets(request, { metadata: traceMetadata(traceId) }) },
    catalogDeadlineMs: options.catalogDeadlineMs ?? 5000,
    exporter: {
      exportCsv: (request, traceId) => exporter.exportCsv(request, { metadata: traceMetadata(traceId) }),
      exportDeletions: (request, traceId) => exporter.exportDeletions(request, { metadata: traceMetadata(traceId) }),
      exportRewrites: (request, traceId) => exporter.exportRewrites(request, { metadata: traceMetadata(traceId) }),
    },
    probeDatabase: options.probeDatabase ?? (async () => undefined),
    build: { imageTag: "1.2.3", commit: "abc123", buildDate: "2026-11-22T00:00:00Z", version: "0.1.0" },
    logger,
    metrics: options.metrics,
    streamStallTimeoutMs: options.streamStallTimeoutMs,
    settledListings: options.settledListings,
  });
  const server: Server = createHttpServer(app.callback(), { ...DEFAULT_HTTP_LIMITS, ...options.http, logger, metrics: options.metrics });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  harness.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  harness.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    catalog.close();
    exporter.close();
    await services.close();
  };
  return harness;
}

export type FakeServiceState = Pick<Harness, "exportRequests" | "listRequests" | "cancelledExports" | "exportBehaviours" | "catalogResponse"> &
  Partial<Pick<Harness, "exportTraceparents">>;

/** Real grpc-js servers (catalog and export on one port) whose handlers read and record `state`. */
export async function startFakeServices(state: FakeServiceState): Promise<{ port: number; close(): Promise<void> }> {
  const grpcServer = new grpc.Server();
  addService(grpcServer, CatalogService, {
    listDatasets: async (request, call) => {
      state.listRequests.push(request);
      const listing = await state.catalogResponse();
      const send = async (message: MessageInitShape<typeof ListDatasetsResponseSchema>) => {
        if (!call.write(create(ListDatasetsResponseSchema, message))) await new Promise<void>((resolve) => call.once("drain", resolve));
      };
      const fail = () => listing.failure ?? new AppError({ status: 500, errorCode: "INTERNAL_ERROR", title: "Internal Server Error" });
      if (listing.failAfterEntries === 0) throw fail();
      await send({
        part: {
          case: "head",
          value: { etag: listing.etag, notModified: listing.notModified ?? false, ...(listing.settledVersion !== undefined ? { settledVersion: listing.settledVersion } : {}) },
        },
      });
      if (listing.notModified) return;
      const per = listing.entriesPerPiece ?? 50;
      for (let i = 0; i < listing.datasets.length; i += per) {
        if (call.cancelled) return;
        const text = listing.datasets.slice(i, i + per).map((d) => JSON.stringify(d)).join(",");
        await send({ part: { case: "entries", value: Buffer.from(i > 0 ? `,${text}` : text) } });
        if (listing.failAfterEntries !== undefined && i + per >= listing.failAfterEntries) throw fail();
      }
    },
  });
  addService(grpcServer, ExportService, {
    exportCsv: async (request, call) => {
      state.exportRequests.push(request);
      state.exportTraceparents?.push(call.metadata.get("traceparent")[0] as string | undefined);
      call.once("cancelled", () => state.cancelledExports++);
      const behaviour = state.exportBehaviours.get(request.datasetKey);
      if (!behaviour) throw new AppError({ status: 404, errorCode: "DATASET_NOT_FOUND", title: "Dataset not found", detail: `No dataset '${request.datasetKey}'.` });
      await behaviour(request, call);
    },
    // The deletion feed streams like the CSV page: a behaviour registered as `deletions:<key>` serves it.
    exportDeletions: async (request, call) => {
      state.exportRequests.push(request as unknown as ExportCsvRequest);
      const behaviour = state.exportBehaviours.get(`deletions:${request.datasetKey}`);
      if (!behaviour) throw new AppError({ status: 404, errorCode: "DATASET_NOT_FOUND", title: "Dataset not found", detail: `No dataset '${request.datasetKey}'.` });
      await behaviour(request as unknown as ExportCsvRequest, call as unknown as grpc.ServerWritableStream<ExportCsvRequest, unknown>);
    },
    // Likewise the rewrite feed: `rewrites:<key>`.
    exportRewrites: async (request, call) => {
      state.exportRequests.push(request as unknown as ExportCsvRequest);
      const behaviour = state.exportBehaviours.get(`rewrites:${request.datasetKey}`);
      if (!behaviour) throw new AppError({ status: 404, errorCode: "DATASET_NOT_FOUND", title: "Dataset not found", detail: `No dataset '${request.datasetKey}'.` });
      await behaviour(request as unknown as ExportCsvRequest, call as unknown as grpc.ServerWritableStream<ExportCsvRequest, unknown>);
    },
  });
  const port = await listen(grpcServer, "127.0.0.1:0");
  return { port, close: () => shutdown(grpcServer, 1000) };
}

/** Polls until `condition` holds (or fails the test after `timeoutMs`). */
export async function eventually(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const auth = { authorization: `Bearer ${GOOD_KEY}` };
