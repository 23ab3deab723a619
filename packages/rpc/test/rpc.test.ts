import * as grpc from "@grpc/grpc-js";
import { AppError, Errors } from "@exportsvc/common";
import { create } from "@bufbuild/protobuf";
import { ExportCsvResponseSchema, ExportService, SchemaService } from "@exportsvc/proto";
import { addService, createClient, fromServiceError, listen, shutdown } from "../src";

describe("descriptor → grpc-js adapter", () => {
  let server: grpc.Server;
  let address: string;

  beforeAll(async () => {
    server = new grpc.Server();
    addService(server, SchemaService, {
      syncDatasets: async (req) => {
        if (req.organizationId === "missing") throw Errors.datasetNotFound("x");
        if (req.organizationId === "boom") throw new Error("secret internals");
        return { changed: req.organizationId.length };
      },
    });
    addService(server, ExportService, {
      exportCsv: async (req, call) => {
        for (let i = 0; i < (req.limit ?? 0); i++) call.write(create(ExportCsvResponseSchema, { data: Buffer.from(`row${i}\n`) }));
        if (req.limit === 3) throw Errors.databaseUnavailable();
      },
      exportDeletions: async () => undefined,
      exportRewrites: async () => undefined,
    });
    const port = await listen(server, "127.0.0.1:0");
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => shutdown(server, 1000));

  it("round-trips unary messages", async () => {
    const client = createClient(SchemaService, address);
    expect((await client.syncDatasets({ organizationId: "seven-x" })).changed).toBe(7);
    expect((await client.syncDatasets({ organizationId: "" })).changed).toBe(0);
    client.close();
  });

  it("carries AppErrors across and hides other failures", async () => {
    const client = createClient(SchemaService, address);
    await expect(client.syncDatasets({ organizationId: "missing" })).rejects.toMatchObject({ status: 404, errorCode: "DATASET_NOT_FOUND" });
    const err = await client.syncDatasets({ organizationId: "boom" }).catch((e: AppError) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).errorCode).toBe("INTERNAL_ERROR");
    expect((err as AppError).message).not.toContain("secret internals");
    client.close();
  });

  it("streams byte chunks and reports a failure after some chunks", async () => {
    const client = createClient(ExportService, address);
    const chunks: string[] = [];
    for await (const msg of client.exportCsv({ organizationId: "o", datasetKey: "d", limit: 2 })) chunks.push(Buffer.from(msg.data).toString());
    expect(chunks).toEqual(["row0\n", "row1\n"]);
    const failing = client.exportCsv({ organizationId: "o", datasetKey: "d", limit: 3 });
    const got: string[] = [];
    const err = await (async () => {
      try {
        for await (const msg of failing) got.push(Buffer.from(msg.data).toString());
      } catch (e) {
        return fromServiceError(e);
      }
    })();
    expect(got.length).toBe(3);
    expect(err?.errorCode).toBe("DATABASE_UNAVAILABLE");
    client.close();
  });
});
