import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import pino from "pino";
import { CatalogService, ExportService, type ExportCsvRequest, type ListDatasetsRequest } from "@exportsvc/proto";
import { addService, createClient, grpc, listen, shutdown } from "@exportsvc/rpc";
import { AppError } from "@exportsvc/common";
import { createApp, type AppDependencies } from "../../src/app";
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
  get inFlight(): number {
    return this.admitted - this.released;
  }
  async admit(): Promise<Admission> {
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

export interface Harness {
  url: string;
  authenticator: FakeAuthenticator;
  rateLimiter: FakeRateLimiter;
  /** Requests the fake export service received. */
  exportRequests: ExportCsvRequest[];
  listRequests: ListDatasetsRequest[];
  /** Export calls the client cancelled. */
  cancelledExports: number;
  exportBehaviours: Map<string, ExportBehaviour>;
  catalogResponse: () => Promise<{ datasets: unknown[]; etag: string }>;
  logs: string[];
  close(): Promise<void>;
}

export interface HarnessOptions {
  probeDatabase?: AppDependencies["probeDatabase"];
  /** Points the export client at an address where nothing listens. */
  exportAddress?: string;
  catalogAddress?: string;
  metrics?: AppDependencies["metrics"];
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
    catalog: { listDatasets: (request) => catalog.listDatasets(request, { deadlineMs: 5000 }) },
    exporter: { exportCsv: (request) => exporter.exportCsv(request) },
    probeDatabase: options.probeDatabase ?? (async () => undefined),
    build: { imageTag: "1.2.3", commit: "abc123", buildDate: "2026-11-22T00:00:00Z", version: "0.1.0" },
    logger,
    metrics: options.metrics,
  });
  const server: Server = createServer(app.callback());
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

export type FakeServiceState = Pick<Harness, "exportRequests" | "listRequests" | "cancelledExports" | "exportBehaviours" | "catalogResponse">;

/** Real grpc-js servers (catalog and export on one port) whose handlers read and record `state`. */
export async function startFakeServices(state: FakeServiceState): Promise<{ port: number; close(): Promise<void> }> {
  const grpcServer = new grpc.Server();
  addService(grpcServer, CatalogService, {
    listDatasets: async (request: ListDatasetsRequest) => {
      state.listRequests.push(request);
      return state.catalogResponse();
    },
  });
  addService(grpcServer, ExportService, {
    exportCsv: async (request: ExportCsvRequest, call: grpc.ServerWritableStream<ExportCsvRequest, unknown>) => {
      state.exportRequests.push(request);
      call.once("cancelled", () => state.cancelledExports++);
      const behaviour = state.exportBehaviours.get(request.datasetKey);
      if (!behaviour) throw new AppError({ status: 404, errorCode: "DATASET_NOT_FOUND", title: "Dataset not found", detail: `No dataset '${request.datasetKey}'.` });
      await behaviour(request, call);
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
