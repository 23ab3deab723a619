import { createLogger, type Logger } from "@exportsvc/common";
import { createPool, isDatabaseUnavailable } from "@exportsvc/db";
import { startMaintenanceLoop, type MaintenanceLoop } from "@exportsvc/form-datasets";
import { SchemaService, type AssignNamesRequest, type SyncDatasetsRequest } from "@exportsvc/proto";
import { handlerErrorMapping, startGrpcService } from "@exportsvc/rpc";
import type { SchemaConfig } from "./config";
import { assignNames } from "./handlers/assign-names";
import { syncDatasets } from "./handlers/sync-datasets";
import { RegistrySyncWorker } from "./queue/registry-sync-worker";
import { requeueOnDefinitionsChange } from "./sync/definitions-resync";
import { fixedDatasetsSyncer } from "./sync/fixed-datasets";
import type { DatasetSyncer } from "./sync/syncer";

export interface RunningSchemaService {
  port: number;
  worker: RegistrySyncWorker;
  stop(): Promise<void>;
}

export interface SchemaServiceOptions {
  /** Registry concerns to keep current; fixed datasets by default (form datasets plug in here). */
  syncers?: readonly DatasetSyncer[];
  log?: Logger;
  /** Restricts the form-dataset maintenance loop to one organization (tests, tools); default all. */
  formMaintenanceOrganizationId?: string;
}

export const DEFAULT_SYNCERS: readonly DatasetSyncer[] = [fixedDatasetsSyncer];

/** Starts the SchemaService gRPC server, the registry sync queue worker and the form-dataset maintenance loop. */
export async function start(config: SchemaConfig, options: SchemaServiceOptions = {}): Promise<RunningSchemaService> {
  const log = options.log ?? createLogger("schema", config.LOG_LEVEL);
  const syncers = options.syncers ?? DEFAULT_SYNCERS;
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, applicationName: "schema" });
  const withErrorMapping = handlerErrorMapping(log, isDatabaseUnavailable);
  const worker = new RegistrySyncWorker({ pool, databaseUrl: config.DATABASE_URL, syncers, pollMs: config.REGISTRY_POLL_MS, log });

  const startBackgroundWork = async () => {
    // A failure here only delays the re-sync to the next start; the service itself can run.
    await requeueOnDefinitionsChange(pool).then(
      (queued) => queued.length > 0 && log.info({ queued: queued.length }, "fixed dataset definitions changed; organizations queued for sync"),
      (err: unknown) => log.warn({ err }, "could not check fixed dataset definitions"),
    );
    worker.start();
    const formMaintenance: MaintenanceLoop | undefined = config.FORM_DATASETS_MAINTENANCE
      ? startMaintenanceLoop(pool, {
          pollIntervalMs: config.FORM_DATASETS_POLL_MS,
          rebuildParallelism: config.FORM_REBUILD_PARALLELISM,
          organizationId: options.formMaintenanceOrganizationId,
          onError: (err) => log.warn({ err }, "form dataset maintenance pass failed; retrying on the next wake"),
          onApplied: (result) => log.debug({ result }, "form dataset changes applied"),
        })
      : undefined;
    return {
      stop: async () => {
        await worker.stop();
        await formMaintenance?.stop();
      },
    };
  };

  const { port, stop } = await startGrpcService({
    name: "schema",
    settings: config,
    log,
    pool,
    implement: () => [
      {
        service: SchemaService,
        impl: {
          assignNames: async (request: AssignNamesRequest) => assignNames(request),
          syncDatasets: (request: SyncDatasetsRequest) => withErrorMapping("SyncDatasets", () => syncDatasets(pool, syncers, request)),
        },
      },
    ],
    startBackgroundWork,
  });
  return { port, worker, stop };
}
