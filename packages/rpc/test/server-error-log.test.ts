import * as grpc from "@grpc/grpc-js";
import { Errors, type Logger } from "@exportsvc/common";
import { ExportService, SchemaService } from "@exportsvc/proto";
import { addService, callTraceId, createClient, listen, shutdown, traceMetadata } from "../src";

/** Issue 12.4: every 5xx is logged by the service that produced it, with the request's trace id. */
describe("5xx answers are logged by the serving service with the call's trace id", () => {
  const entries: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const record = (level: string) => (fields: Record<string, unknown>, msg: string) => void entries.push({ level, fields, msg });
  // The per-call `rpc` lines (info) are call-instrumentation.test.ts's subject.
  const log = { warn: record("warn"), error: record("error"), info: () => undefined } as unknown as Logger;
  let server: grpc.Server;
  let address: string;
  const traceId = "0af7651916cd43dd8448eb211c80319c";

  beforeAll(async () => {
    server = new grpc.Server();
    addService(
      server,
      SchemaService,
      {
        syncDatasets: async (req) => {
          if (req.organizationId === "missing") throw Errors.datasetNotFound("x");
          if (req.organizationId === "down") throw Errors.databaseUnavailable();
          throw new Error('invalid byte sequence for encoding "UTF8": 0x00');
        },
      },
      { log },
    );
    addService(
      server,
      ExportService,
      {
        exportCsv: async () => {
          throw new Error("relation does not exist");
        },
        exportDeletions: async () => undefined,
        exportRewrites: async () => undefined,
      },
      { log },
    );
    address = `127.0.0.1:${await listen(server, "127.0.0.1:0")}`;
  });
  afterAll(() => shutdown(server, 1000));
  beforeEach(() => void entries.splice(0));

  it("a failure that is not an AppError: logged in full as an error with the trace id; the client gets a bare 500", async () => {
    const client = createClient(SchemaService, address);
    await expect(client.syncDatasets({ organizationId: "o" }, { metadata: traceMetadata(traceId) })).rejects.toMatchObject({ status: 500 });
    client.close();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ level: "error", msg: "exportsvc.v1.SchemaService.SyncDatasets failed", fields: { traceId, status: 500 } });
    expect(String((entries[0].fields.err as Error).message)).toContain("0x00");
  });

  it("a typed 5xx: a warning with the trace id; a 4xx is not logged", async () => {
    const client = createClient(SchemaService, address);
    await expect(client.syncDatasets({ organizationId: "down" }, { metadata: traceMetadata(traceId) })).rejects.toMatchObject({ status: 503 });
    await expect(client.syncDatasets({ organizationId: "missing" }, { metadata: traceMetadata(traceId) })).rejects.toMatchObject({ status: 404 });
    client.close();
    expect(entries).toEqual([{ level: "warn", msg: "exportsvc.v1.SchemaService.SyncDatasets answered 503", fields: { traceId, status: 503, errorCode: "DATABASE_UNAVAILABLE" } }]);
  });

  it("a streaming call's failure is logged the same way", async () => {
    const client = createClient(ExportService, address);
    const stream = client.exportCsv({ organizationId: "o", datasetKey: "k" }, { metadata: traceMetadata(traceId) });
    await new Promise<void>((resolve) => {
      stream.on("error", () => resolve());
      stream.on("data", () => undefined);
    });
    client.close();
    expect(entries[0]).toMatchObject({ level: "error", fields: { traceId } });
  });

  it("callTraceId reads traceparent metadata and ignores malformed or all-zero ids", () => {
    expect(callTraceId(traceMetadata(traceId))).toBe(traceId);
    const bad = new grpc.Metadata();
    bad.set("traceparent", "00-00000000000000000000000000000000-0000000000000001-01");
    expect(callTraceId(bad)).toBeUndefined();
    expect(callTraceId(new grpc.Metadata())).toBeUndefined();
    expect(traceMetadata("not-a-trace-id").get("traceparent")).toEqual([]);
  });
});
