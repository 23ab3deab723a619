import { createLogger, type Logger } from "@exportsvc/common";
import { createPool, isDatabaseUnavailable } from "@exportsvc/db";
import { CursorCodec, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";
import { DEFAULT_DROP_GRACE_MS, startMaintenanceLoop, type MaintenanceLoop, type RebuildReport } from "@exportsvc/form-datasets";
import { SchemaService } from "@exportsvc/proto";
import { serve, startGrpcService } from "@exportsvc/rpc";
import type { SchemaConfig } from "./config";
import { startRenderedDatasets, type RenderedDatasetsLoop } from "./maintenance/rendered-datasets";
import { startTombstonePruning } from "./maintenance/tombstone-pruning";
import { syncDatasets } from "./handlers/sync-datasets";
import { RegistrySyncWorker } from "./queue/registry-sync-worker";
import { requeueOnDefinitionsChange } from "./sync/definitions-resync";
import { fixedDatasetsSyncer } from "./sync/fixed-datasets";
import type { DatasetSyncer } from "./sync/syncer";
import { SchemaMetrics, type RebuildOutcome } from "./metrics";

export interface RunningSchemaService {
  port: number;
  /** Port of /metrics when METRICS_PORT is set. */
  metricsPort?: number;
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

/**
 * dataset_rebuilds_total's outcome of a rebuild request: `superseded` when it found nothing to build
 * (the form was deleted, unpublished or removed after the request was queued); a rebuild that threw
 * (transient database failure, retried later) is a failure like one that marked the form failed.
 */
export function rebuildOutcome(status: RebuildReport["status"]): RebuildOutcome {
  if (status === "built") return "success";
  if (status === "failed" || status === "error") return "failure";
  return "superseded";
}

/**
 * A rendered dataset is rendered again at the earliest this many times its last render's duration
 * after it: under constant writes its renders take at most a tenth of a connection's time.
 */
export const RENDER_DUTY_FACTOR = 10;

export const DEFAULT_SYNCERS: readonly DatasetSyncer[] = [fixedDatasetsSyncer];

/** Starts the SchemaService gRPC server, the registry sync queue worker and the form-dataset maintenance loop. */
export async function start(config: SchemaConfig, options: SchemaServiceOptions = {}): Promise<RunningSchemaService> {
  const log = options.log ?? createLogger("schema", config.LOG_LEVEL);
  const syncers = options.syncers ?? DEFAULT_SYNCERS;
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, maxUses: config.DATABASE_POOL_MAX_USES, applicationName: SERVICE_APPLICATION_NAME.schema });
  const worker = new RegistrySyncWorker({ pool, databaseUrl: config.DATABASE_URL, syncers, pollMs: config.REGISTRY_POLL_MS, log, concurrency: config.REGISTRY_SYNC_CONCURRENCY });

  const startBackgroundWork = async (metrics: SchemaMetrics) => {
    // A failure here only delays the re-sync to the next start; the service itself can run.
    await requeueOnDefinitionsChange(pool).then(
      (queued) => queued.length > 0 && log.info({ queued: queued.length }, "fixed dataset definitions changed; organizations queued for sync"),
      (err: unknown) => log.warn({ err }, "could not check fixed dataset definitions"),
    );
    worker.start();
    if (config.FORM_DATASETS_MAINTENANCE) metrics.initRebuildSeries();
    const formMaintenance: MaintenanceLoop | undefined = config.FORM_DATASETS_MAINTENANCE
      ? startMaintenanceLoop(pool, {
          pollIntervalMs: config.FORM_DATASETS_POLL_MS,
          rebuildParallelism: config.FORM_REBUILD_PARALLELISM,
          concurrency: config.FORM_MAINTENANCE_CONCURRENCY,
          cursorCodec: config.CURSOR_KEYS ? new CursorCodec({ keyring: config.CURSOR_KEYS }) : undefined,
          organizationId: options.formMaintenanceOrganizationId,
          onError: (err) => log.warn({ err }, "form dataset maintenance pass failed; retrying on the next wake"),
          onApplied: (result) => log.debug({ result }, "form dataset changes applied"),
          onRebuild: (report) => {
            const outcome = rebuildOutcome(report.status);
            metrics.observeRebuild(outcome, report.durationSeconds);
            if (outcome === "failure") log.error({ ...report, outcome }, "form dataset rebuild failed");
            else log.info({ ...report, outcome }, "form dataset rebuild finished");
          },
          onLag: (seconds) => metrics.setMaintenanceLag(seconds),
        })
      : undefined;
    const pruning = startTombstonePruning(pool, { retentionDays: config.TOMBSTONE_RETENTION_DAYS, log });
    const rendered: RenderedDatasetsLoop | undefined = config.RENDERED_DATASETS
      ? startRenderedDatasets(pool, {
          codec: config.CURSOR_KEYS ? new CursorCodec({ keyring: config.CURSOR_KEYS }) : undefined,
          minRows: config.RENDERED_DATASETS_MIN_ROWS,
          intervalMs: config.RENDERED_DATASETS_INTERVAL_MS,
          dutyFactor: RENDER_DUTY_FACTOR,
          dropGraceMs: DEFAULT_DROP_GRACE_MS,
          organizationId: options.formMaintenanceOrganizationId,
          log,
          onRender: (result) => metrics.observeRender(result.outcome, result.ms / 1000),
        })
      : undefined;
    return {
      stop: async () => {
        await worker.stop();
        await formMaintenance?.stop();
        await pruning.stop();
        await rendered?.stop();
      },
    };
  };

  const { port, metricsPort, stop } = await startGrpcService({
    name: "schema",
    settings: config,
    log,
    pool,
    implement: () => [serve(SchemaService, { syncDatasets: (request) => syncDatasets(pool, syncers, request) }, { errors: { unavailable: isDatabaseUnavailable } })],
    startBackgroundWork,
    createMetrics: (metricsOptions) => new SchemaMetrics(metricsOptions),
  });
  return { port, metricsPort, worker, stop };
}
