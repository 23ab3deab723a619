import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { addHealthService, type HealthStatusSetter } from "@exportsvc/rpc";

/**
 * The internal services' readiness/liveness probes are Kubernetes gRPC probes against
 * grpc.health.v1.Health. The client here is built from the official .proto by proto-loader
 * (protobufjs), an encoder independent of the generated @bufbuild/protobuf code under test.
 */
const HEALTH_PROTO = `syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
`;

type HealthClient = grpc.Client & {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
};

function officialClient(port: number): HealthClient {
  const dir = mkdtempSync(join(tmpdir(), "health-proto-"));
  writeFileSync(join(dir, "health.proto"), HEALTH_PROTO);
  const definition = loadSync(join(dir, "health.proto"), { enums: String, defaults: true });
  rmSync(dir, { recursive: true, force: true });
  const pkg = grpc.loadPackageDefinition(definition) as any;
  return new pkg.grpc.health.v1.Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as HealthClient;
}

const check = (client: HealthClient, service: string) =>
  new Promise<string>((resolve, reject) => client.Check({ service }, (err, res) => (err ? reject(err) : resolve(res.status))));

describe("gRPC health service", () => {
  let server: grpc.Server;
  let setStatus: HealthStatusSetter;
  let client: HealthClient;

  beforeAll(async () => {
    server = new grpc.Server();
    setStatus = addHealthService(server);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    client = officialClient(port);
  });

  afterAll(() => {
    client.close();
    server.forceShutdown();
  });

  it("answers Check for the whole server, SERVING by default, and follows the setter", async () => {
    expect(await check(client, "")).toBe("SERVING");
    setStatus("NOT_SERVING");
    expect(await check(client, "")).toBe("NOT_SERVING");
    setStatus("SERVING");
    expect(await check(client, "")).toBe("SERVING");
  });

  it("answers NOT_FOUND for a service never reported, then its own status", async () => {
    await expect(check(client, "exportsvc.v1.ExportService")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    setStatus("SERVING", "exportsvc.v1.ExportService");
    expect(await check(client, "exportsvc.v1.ExportService")).toBe("SERVING");
  });

  it("streams status changes to Watch, starting with the current status", async () => {
    const stream = client.Watch({ service: "exportsvc.v1.SchemaService" });
    const seen: string[] = [];
    const errors: grpc.ServiceError[] = [];
    stream.on("error", (err: grpc.ServiceError) => errors.push(err));
    const done = new Promise<void>((resolve) => {
      stream.on("data", (msg: { status: string }) => {
        seen.push(msg.status);
        if (seen.length === 1) setStatus("SERVING", "exportsvc.v1.SchemaService");
        if (seen.length === 2) setStatus("SERVING", "exportsvc.v1.SchemaService"); // unchanged: not resent
        if (seen.length === 2) setStatus("NOT_SERVING", "exportsvc.v1.SchemaService");
        if (seen.length === 3) resolve();
      });
    });
    await done;
    stream.cancel();
    await new Promise((resolve) => stream.on("close", resolve));
    expect(errors.map((e) => e.code)).toEqual([grpc.status.CANCELLED]);
    expect(seen).toEqual(["SERVICE_UNKNOWN", "SERVING", "NOT_SERVING"]);
  });
});
