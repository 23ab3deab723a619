import {
  addHealthService,
  buildInfoFromEnv,
  createLogger,
  createMetrics,
  instrumentServiceImpl,
  startMetricsServer,
  type Logger,
  type MetricsServer,
} from "@exportsvc/common";
import { createPool } from "@exportsvc/db";
import { CatalogService, SchemaService, type ListDatasetsRequest } from "@exportsvc/proto";
import { addService, createClient, grpc, listen, shutdown } from "@exportsvc/rpc";
import type { CatalogConfig } from "./config";
import { withErrorMapping } from "./db-errors";
import { listDatasets } from "./list-datasets";

export interface RunningCatalogService {
  port: number;
  stop(): Promise<void>;
}

/** Starts the CatalogService gRPC server. */
export async function start(config: CatalogConfig, options: { log?: Logger } = {}): Promise<RunningCatalogService> {
  const log = options.log ?? createLogger("catalog", config.LOG_LEVEL);
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, applicationName: "catalog" });
  const schema = createClient(SchemaService, config.SCHEMA_ADDRESS);
  const deps = {
    pool,
    syncRegistry: async (organizationId: string) => {
      await schema.syncDatasets({ organizationId }, { deadlineMs: config.SCHEMA_SYNC_TIMEOUT_MS });
    },
  };
  const server = new grpc.Server();
  const metrics = createMetrics({ build: buildInfoFromEnv() });
  metrics.observePool(pool, "main");
  const setHealth = addHealthService(server);
  addService(server, CatalogService, instrumentServiceImpl(metrics, CatalogService.typeName, {
    listDatasets: (request: ListDatasetsRequest) => withErrorMapping(log, "ListDatasets", () => listDatasets(deps, request.organizationId)),
  }));
  let port: number;
  let metricsServer: MetricsServer | undefined;
  try {
    port = await listen(server, `${config.GRPC_HOST}:${config.GRPC_PORT}`);
    if (config.METRICS_PORT !== undefined) metricsServer = await startMetricsServer(config.METRICS_PORT, metrics.registry, config.GRPC_HOST);
  } catch (err) {
    server.forceShutdown();
    schema.close();
    await pool.end();
    throw err;
  }
  setHealth("SERVING", CatalogService.typeName);
  log.info({ port, metricsPort: metricsServer?.port }, "catalog service listening");

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Probes see NOT_SERVING before calls start being refused.
      setHealth("NOT_SERVING");
      setHealth("NOT_SERVING", CatalogService.typeName);
      await shutdown(server, config.SHUTDOWN_GRACE_MS);
      await metricsServer?.close();
      schema.close();
      await pool.end();
      log.info("catalog service stopped");
    })());
  return { port, stop };
}
