import * as grpc from "@grpc/grpc-js";
import { AppError, createMetrics, Errors, type Logger } from "@exportsvc/common";
import { SchemaService } from "@exportsvc/proto";
import { createClient, handlerFailure, listen, serve, shutdown, traceMetadata } from "../src";

const unavailable = (err: unknown) => (err as { code?: string }).code === "ECONNREFUSED";

describe("handlerFailure: the one error policy of the gRPC handlers", () => {
  it("lets AppErrors through unchanged, with no cause to log", () => {
    const notFound = Errors.datasetNotFound("x");
    expect(handlerFailure(notFound, { unavailable })).toEqual({ answer: notFound });
  });

  it("turns an unreachable database into the typed 503, keeping the cause", () => {
    const cause = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const { answer, cause: logged } = handlerFailure(cause, { unavailable });
    expect(answer).toBeInstanceOf(AppError);
    expect(answer).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    expect(logged).toBe(cause);
  });

  it("turns anything else into a bare 500 (and an unreachable database too, without a policy)", () => {
    const cause = new Error("secret internals");
    const { answer, cause: logged } = handlerFailure(cause, { unavailable });
    expect(answer).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
    expect(answer.message).not.toContain("secret internals");
    expect(logged).toBe(cause);
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    expect(handlerFailure(refused).answer).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
  });
});

describe("serve(Service, impl, { errors }): the policy applied to every method", () => {
  const entries: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const record = (level: string) => (fields: Record<string, unknown>, msg: string) => void entries.push({ level, fields, msg });
  const log = { warn: record("warn"), error: record("error"), info: () => undefined } as unknown as Logger;
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
  const traceId = "0af7651916cd43dd8448eb211c80319c";
  const served = serve(
    SchemaService,
    {
      syncDatasets: async (request) => {
        if (request.organizationId === "down") throw refused;
        throw new Error("secret internals");
      },
    },
    { errors: { unavailable } },
  );
  const server = new grpc.Server();
  let address: string;

  beforeAll(async () => {
    served.add(server, { log, metrics: createMetrics({ defaultMetrics: false }) });
    address = `127.0.0.1:${await listen(server, "127.0.0.1:0")}`;
  });
  afterAll(() => shutdown(server, 1000));
  beforeEach(() => void entries.splice(0));

  it("answers an unreachable database 503 DATABASE_UNAVAILABLE and warns with the cause and the trace id", async () => {
    const client = createClient(SchemaService, address);
    await expect(client.syncDatasets({ organizationId: "down" }, { metadata: traceMetadata(traceId) })).rejects.toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    client.close();
    expect(entries).toEqual([
      { level: "warn", msg: "exportsvc.v1.SchemaService.SyncDatasets: database unavailable", fields: { traceId, status: 503, errorCode: "DATABASE_UNAVAILABLE", err: refused } },
    ]);
  });

  it("answers anything else a bare 500 and logs the cause in full", async () => {
    const client = createClient(SchemaService, address);
    const err = await client.syncDatasets({ organizationId: "o" }, { metadata: traceMetadata(traceId) }).catch((e: unknown) => e);
    client.close();
    expect(err).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
    expect((err as AppError).message).not.toContain("secret internals");
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ level: "error", msg: "exportsvc.v1.SchemaService.SyncDatasets failed", fields: { traceId, status: 500 } });
    expect((entries[0].fields.err as Error).message).toBe("secret internals");
  });
});
