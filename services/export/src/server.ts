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
import { CursorCodec } from "@exportsvc/datasets";
import { ExportService, SchemaService } from "@exportsvc/proto";
import { addService, createClient, grpc, listen, shutdown } from "@exportsvc/rpc";
import type { ExportConfig } from "./config";
import { exportCsvHandler } from "./export-csv";

export interface RunningExportService {
  port: number;
  /** Port of /metrics when METRICS_PORT is set. */
  metricsPort?: number;
  stop(): Promise<void>;
}

export interface StartOptions {
  log?: Logger;
  /** Replaces the SyncDatasets call (tests). */
  syncRegistry?: (organizationId: string) => Promise<void>;
  /** Issues cursors of another version (tests of version retirement). */
  cursorVersion?: number;
}

/** Starts the ExportService gRPC server (plus gRPC health and, with METRICS_PORT, /metrics). */
export async function start(config: ExportConfig, options: StartOptions = {}): Promise<RunningExportService> {
  const log = options.log ?? createLogger("export", config.LOG_LEVEL);
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, applicationName: "exportsvc-export" });
  const schema = config.SCHEMA_ADDRESS ? createClient(SchemaService, config.SCHEMA_ADDRESS) : undefined;
  const syncRegistry =
    options.syncRegistry ??
    (schema
      ? async (organizationId: string) => {
          await schema.syncDatasets({ organizationId }, { deadlineMs: config.SCHEMA_SYNC_TIMEOUT_MS });
        }
      : undefined);
  const metrics = createMetrics({ build: buildInfoFromEnv() });
  metrics.observePool(pool, "main");
  const server = new grpc.Server({ "grpc.max_send_message_length": 16 * 1024 * 1024 });
  const setHealth = addHealthService(server);
  const exportCsv = exportCsvHandler({
    pool,
    codec: new CursorCodec({ keyring: config.CURSOR_KEYS, version: options.cursorVersion }),
    logger: log,
    syncRegistry,
    chunkBytes: config.EXPORT_CHUNK_BYTES,
    metrics,
  });
  addService(server, ExportService, instrumentServiceImpl(metrics, ExportService.typeName, { exportCsv }));

  let port: number;
  let metricsServer: MetricsServer | undefined;
  try {
    port = await listen(server, `${config.GRPC_HOST}:${config.GRPC_PORT}`);
    if (config.METRICS_PORT !== undefined) metricsServer = await startMetricsServer(config.METRICS_PORT, metrics.registry, config.GRPC_HOST);
  } catch (err) {
    server.forceShutdown();
    schema?.close();
    await pool.end();
    throw err;
  }
  setHealth("SERVING", ExportService.typeName);
  log.info({ port, metricsPort: metricsServer?.port }, "export service listening");

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      setHealth("NOT_SERVING");
      setHealth("NOT_SERVING", ExportService.typeName);
      // In-flight pages get SHUTDOWN_GRACE_MS to finish; the rest are cut (clients retry the page).
      await shutdown(server, config.SHUTDOWN_GRACE_MS);
      await metricsServer?.close();
      schema?.close();
      await pool.end();
      log.info("export service stopped");
    })());
  return { port, metricsPort: metricsServer?.port, stop };
}
