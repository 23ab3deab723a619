import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { createLogger, createMetrics, Errors } from "@exportsvc/common";
import { ExportCsvResponseSchema, ExportService, SchemaService } from "@exportsvc/proto";
import { addService, createClient, grpcStatusForError, grpcStatusName, listen, shutdown, toServiceError } from "../src";

const ORG = "0d3e6f6a-5c1b-4d7e-9a42-3f0c1e2d9b10";

/** The value of one sample of the exposition, or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

describe("the error → gRPC status mapping", () => {
  it("maps an AppError by its HTTP status, and anything else to INTERNAL, on the wire and in names", () => {
    expect(grpcStatusName(grpcStatusForError(Errors.invalidParameter({ limit: ["bad"] })))).toBe("INVALID_ARGUMENT");
    expect(grpcStatusName(grpcStatusForError(Errors.datasetNotFound("x")))).toBe("NOT_FOUND");
    expect(grpcStatusName(grpcStatusForError(Errors.databaseUnavailable()))).toBe("UNAVAILABLE");
    expect(grpcStatusName(grpcStatusForError(new Error("bug")))).toBe("INTERNAL");
    expect(grpcStatusName(grpc.status.OK)).toBe("OK");
    expect(toServiceError(Errors.databaseUnavailable()).code).toBe(grpc.status.UNAVAILABLE);
    expect(toServiceError(new Error("bug")).code).toBe(grpc.status.INTERNAL);
  });
});

describe("addService instruments every call once: metrics and one rpc log line", () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("catalog", "info", { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const metrics = createMetrics({ defaultMetrics: false });
  let server: grpc.Server;
  let address: string;

  beforeAll(async () => {
    server = new grpc.Server();
    addService(
      server,
      SchemaService,
      {
        syncDatasets: async (request) => {
          if (request.organizationId === "") throw Errors.databaseUnavailable();
          if (request.organizationId === "bug") throw new Error("bug");
          return { changed: 2 };
        },
      },
      { log, metrics },
    );
    addService(
      server,
      ExportService,
      {
        exportCsv: async (_request, call) => {
          call.write(create(ExportCsvResponseSchema, { data: Buffer.from("a\n") }));
        },
        exportRewrites: async () => undefined,
        exportDeletions: async () => {
          throw Errors.datasetNotFound("x");
        },
      },
      { log, metrics },
    );
    address = `127.0.0.1:${await listen(server, "127.0.0.1:0")}`;
  });
  afterAll(() => shutdown(server, 1000));

  it("counts and logs unary and streaming calls with the gRPC code of their outcome", async () => {
    const schema = createClient(SchemaService, address);
    const exporter = createClient(ExportService, address);
    await expect(schema.syncDatasets({ organizationId: ORG })).resolves.toMatchObject({ changed: 2 });
    await expect(schema.syncDatasets({ organizationId: "" })).rejects.toMatchObject({ errorCode: "DATABASE_UNAVAILABLE" });
    await expect(schema.syncDatasets({ organizationId: "bug" })).rejects.toMatchObject({ status: 500 });
    const drain = (stream: grpc.ClientReadableStream<unknown>) =>
      new Promise<void>((resolve) => {
        stream.on("data", () => undefined);
        stream.on("error", () => resolve());
        stream.on("end", () => resolve());
      });
    await drain(exporter.exportCsv({ organizationId: ORG, datasetKey: "k" }));
    await drain(exporter.exportDeletions({ organizationId: ORG, datasetKey: "k" }));
    schema.close();
    exporter.close();

    const rpcLines = lines.filter((l) => l.msg === "rpc");
    expect(rpcLines.map(({ grpcService, grpcMethod, grpcCode, organizationId }) => ({ grpcService, grpcMethod, grpcCode, organizationId }))).toEqual([
      { grpcService: "exportsvc.v1.SchemaService", grpcMethod: "syncDatasets", grpcCode: "OK", organizationId: ORG },
      { grpcService: "exportsvc.v1.SchemaService", grpcMethod: "syncDatasets", grpcCode: "UNAVAILABLE", organizationId: undefined },
      { grpcService: "exportsvc.v1.SchemaService", grpcMethod: "syncDatasets", grpcCode: "INTERNAL", organizationId: "bug" },
      { grpcService: "exportsvc.v1.ExportService", grpcMethod: "exportCsv", grpcCode: "OK", organizationId: ORG },
      { grpcService: "exportsvc.v1.ExportService", grpcMethod: "exportDeletions", grpcCode: "NOT_FOUND", organizationId: ORG },
    ]);
    for (const line of rpcLines) expect(line.durationMs).toEqual(expect.any(Number));

    const text = await metrics.registry.metrics();
    const sync = { grpc_service: "exportsvc.v1.SchemaService", grpc_method: "syncDatasets" };
    expect(sample(text, "grpc_server_handled_total", { ...sync, grpc_code: "OK" })).toBe(1);
    expect(sample(text, "grpc_server_handled_total", { ...sync, grpc_code: "UNAVAILABLE" })).toBe(1);
    expect(sample(text, "grpc_server_handled_total", { ...sync, grpc_code: "INTERNAL" })).toBe(1);
    expect(sample(text, "grpc_server_handled_total", { grpc_method: "exportCsv", grpc_code: "OK" })).toBe(1);
    expect(sample(text, "grpc_server_handled_total", { grpc_method: "exportDeletions", grpc_code: "NOT_FOUND" })).toBe(1);
    expect(sample(text, "grpc_server_handling_seconds_count", sync)).toBe(3);
  });
});
