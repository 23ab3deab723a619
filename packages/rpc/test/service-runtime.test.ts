import { createServer, type AddressInfo, type Server } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { buildConfigSchema, createLogger, Errors, parseConfig } from "@exportsvc/common";
import { Health, HealthCheckResponse_ServingStatus, SchemaService, type HealthCheckResponse } from "@exportsvc/proto";
import { freePort } from "../../../scripts/lib/ports";
import { createClient, serve, serviceDefinition, startGrpcService, type GrpcServiceOptions, type GrpcServiceSettings } from "../src";

const log = createLogger("service-runtime-test", "silent");
const SETTINGS: GrpcServiceSettings = { ...parseConfig(buildConfigSchema, {}), GRPC_HOST: "127.0.0.1", GRPC_PORT: 0, SHUTDOWN_GRACE_MS: 1_000 };

/** Records the order in which the runtime releases things. */
function fakePool(events: string[]) {
  return { totalCount: 3, idleCount: 2, waitingCount: 0, end: async () => void events.push("pool.end") };
}

/** The status's name ("SERVING"); rejects with the bare gRPC error (e.g. NOT_FOUND) the Check failed with. */
function healthCheck(port: number, service: string): Promise<string> {
  const HealthClient = grpc.makeGenericClientConstructor(serviceDefinition(Health), Health.typeName);
  const client = new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: HealthCheckResponse) => void): void;
  };
  return new Promise<string>((resolve, reject) =>
    client.check({ service }, (err, res) => {
      client.close();
      return err ? reject(err) : resolve(HealthCheckResponse_ServingStatus[res.status]);
    }),
  );
}

const catalogImpl = () => [
  serve(SchemaService, {
    syncDatasets: async (request) => {
      if (request.organizationId === "missing") throw Errors.datasetNotFound("x");
      return { changed: 7 };
    },
  }),
];

function options(events: string[], overrides: Partial<GrpcServiceOptions> = {}): GrpcServiceOptions {
  return {
    name: "test",
    settings: SETTINGS,
    log,
    pool: fakePool(events),
    implement: catalogImpl,
    release: () => void events.push("release"),
    ...overrides,
  };
}

describe("startGrpcService", () => {
  it("serves the implementations, reports them SERVING and counts calls on /metrics", async () => {
    const events: string[] = [];
    const service = await startGrpcService(options(events, { settings: { ...SETTINGS, METRICS_PORT: 0 } }));
    try {
      expect(await healthCheck(service.port, "")).toBe("SERVING");
      expect(await healthCheck(service.port, SchemaService.typeName)).toBe("SERVING");

      const client = createClient(SchemaService, `127.0.0.1:${service.port}`);
      await expect(client.syncDatasets({ organizationId: "o" })).resolves.toMatchObject({ changed: 7 });
      await expect(client.syncDatasets({ organizationId: "missing" })).rejects.toMatchObject({ errorCode: "DATASET_NOT_FOUND" });
      client.close();

      expect(service.metricsPort).toEqual(expect.any(Number));
      const body = await (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text();
      expect(body).toMatch(/grpc_server_handled_total\{[^}]*grpc_method="syncDatasets"[^}]*grpc_code="OK"[^}]*\} 1/);
      expect(body).toMatch(/grpc_server_handled_total\{[^}]*grpc_code="NOT_FOUND"[^}]*\} 1/);
      expect(body).toContain('db_pool_connections{pool="main",state="total"} 3');
    } finally {
      await service.stop();
    }
    expect(events).toEqual(["release", "pool.end"]);
  });

  it("starts background work after binding and before SERVING, and stops it after draining, before releasing", async () => {
    const events: string[] = [];
    const port = await freePort();
    let statusDuringStart: unknown;
    const service = await startGrpcService(
      options(events, {
        startBackgroundWork: async () => {
          statusDuringStart = await healthCheck(port, SchemaService.typeName).catch((err: grpc.ServiceError) => err.code);
          events.push("background.start");
          return { stop: async () => void events.push("background.stop") };
        },
        settings: { ...SETTINGS, GRPC_PORT: port },
      }),
    );
    expect(statusDuringStart).toBe(grpc.status.NOT_FOUND);
    expect(await healthCheck(service.port, SchemaService.typeName)).toBe("SERVING");
    const first = service.stop();
    expect(service.stop()).toBe(first);
    await first;
    expect(events).toEqual(["background.start", "background.stop", "release", "pool.end"]);
  });

  it("releases everything and rethrows when the port cannot be bound", async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const taken = (blocker.address() as AddressInfo).port;
    const events: string[] = [];
    const background = jest.fn();
    // grpc-js reports the failed bind on the console as well.
    const consoleError = jest.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      await expect(
        startGrpcService(options(events, { settings: { ...SETTINGS, GRPC_PORT: taken }, startBackgroundWork: background })),
      ).rejects.toThrow();
    } finally {
      consoleError.mockRestore();
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
    expect(background).not.toHaveBeenCalled();
    expect(events).toEqual(["release", "pool.end"]);
  });

  it("releases everything and rethrows when the background work fails to start", async () => {
    const events: string[] = [];
    await expect(
      startGrpcService(
        options(events, {
          settings: { ...SETTINGS, METRICS_PORT: 0 },
          startBackgroundWork: async () => {
            throw new Error("no queue");
          },
        }),
      ),
    ).rejects.toThrow("no queue");
    expect(events).toEqual(["release", "pool.end"]);
  });
});
