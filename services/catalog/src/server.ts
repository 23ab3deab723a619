import { createLogger, type Logger } from "@exportsvc/common";
import { createPool, isDatabaseUnavailable } from "@exportsvc/db";
import { CatalogService, SchemaService } from "@exportsvc/proto";
import { createClient, serve, startGrpcService } from "@exportsvc/rpc";
import type { CatalogConfig } from "./config";
import { listDatasets, type ListDatasetsDeps } from "./handlers/list-datasets";
import { streamListing } from "./handlers/stream-listing";
import { ListingCache, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";

export interface RunningCatalogService {
  port: number;
  stop(): Promise<void>;
}

/** Starts the CatalogService gRPC server. */
export async function start(config: CatalogConfig, options: { log?: Logger } = {}): Promise<RunningCatalogService> {
  const log = options.log ?? createLogger("catalog", config.LOG_LEVEL);
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, maxUses: config.DATABASE_POOL_MAX_USES, applicationName: SERVICE_APPLICATION_NAME.catalog });
  const readPool = config.DATABASE_READ_URL
    ? createPool({ connectionString: config.DATABASE_READ_URL, max: config.DATABASE_POOL_MAX, maxUses: config.DATABASE_POOL_MAX_USES, applicationName: SERVICE_APPLICATION_NAME.catalog })
    : undefined;
  const schema = createClient(SchemaService, config.SCHEMA_ADDRESS);
  const deps: ListDatasetsDeps = {
    pool,
    syncRegistry: async (organizationId: string) => {
      await schema.syncDatasets({ organizationId }, { deadlineMs: config.SCHEMA_SYNC_TIMEOUT_MS });
    },
    readReplica: readPool ? { pool: readPool, maxWaitMs: config.READ_REPLICA_MAX_WAIT_MS } : undefined,
    logger: log,
    cache: new ListingCache(config.LISTING_CACHE_BYTES),
  };
  const { port, stop } = await startGrpcService({
    name: "catalog",
    settings: config,
    log,
    pool,
    implement: (metrics) => {
      deps.metrics = metrics;
      if (readPool) metrics?.exposeReplicaFallbacks("listing");
      return [
        serve(
          CatalogService,
          { listDatasets: async (request, call) => streamListing(call, await listDatasets(deps, request.organizationId, request.ifNoneMatch)) },
          { errors: { unavailable: isDatabaseUnavailable } },
        ),
      ];
    },
    release: async () => {
      schema.close();
      await readPool?.end();
    },
  });
  return { port, stop };
}
