import { HEALTH_SERVICE_DEFINITION } from "@exportsvc/common";
import { grpc } from "@exportsvc/rpc";
import { startSchemaService } from "./support";

describe("schema service health", () => {
  it("reports SERVING for the server and SchemaService over grpc.health.v1", async () => {
    const service = await startSchemaService();
    const Health = grpc.makeGenericClientConstructor(HEALTH_SERVICE_DEFINITION, "Health");
    const client = new Health(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
    };
    const check = (name: string) =>
      new Promise<string>((resolve, reject) => client.check({ service: name }, (err, res) => (err ? reject(err) : resolve(res.status))));
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
