import { Health, HealthCheckResponse_ServingStatus, type HealthCheckResponse } from "@exportsvc/proto";
import { grpc, serviceDefinition } from "@exportsvc/rpc";
import { startSchemaService } from "./support";

describe("schema service health", () => {
  it("reports SERVING for the server and SchemaService over grpc.health.v1", async () => {
    const service = await startSchemaService();
    // A bare grpc-js client: an unknown service must fail with the protocol's own NOT_FOUND.
    const HealthClient = grpc.makeGenericClientConstructor(serviceDefinition(Health), Health.typeName);
    const client = new HealthClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: HealthCheckResponse) => void): void;
    };
    const check = (name: string) =>
      new Promise<string>((resolve, reject) =>
        client.check({ service: name }, (err, res) => (err ? reject(err) : resolve(HealthCheckResponse_ServingStatus[res.status]))),
      );
    try {
      expect(await check("")).toBe("SERVING");
      expect(await check("exportsvc.v1.SchemaService")).toBe("SERVING");
      await expect(check("exportsvc.v1.Nope")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    } finally {
      client.close();
      await service.stop();
    }
  });
});
