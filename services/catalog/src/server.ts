import { createLogger, type Logger } from "@exportsvc/common";
import { createPool, isDatabaseUnavailable } from "@exportsvc/db";
import { CatalogService, SchemaService, type ListDatasetsRequest } from "@exportsvc/proto";
import { createClient, handlerErrorMapping, startGrpcService } from "@exportsvc/rpc";
import type { CatalogConfig } from "./config";
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
  const withErrorMapping = handlerErrorMapping(log, isDatabaseUnavailable);
  const { port, stop } = await startGrpcService({
    name: "catalog",
    settings: config,
    log,
    pool,
    implement: () => [
      {
        service: CatalogService,
        impl: {
          listDatasets: (request: ListDatasetsRequest) => withErrorMapping("ListDatasets", () => listDatasets(deps, request.organizationId)),
        },
      },
    ],
    release: () => schema.close(),
  });
  return { port, stop };
}
