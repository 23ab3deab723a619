import { createLogger, type Logger } from "@exportsvc/common";
import { createPool } from "@exportsvc/db";
import { CursorCodec } from "@exportsvc/datasets";
import { ExportService, SchemaService } from "@exportsvc/proto";
import { createClient, startGrpcService } from "@exportsvc/rpc";
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
  const { port, metricsPort, stop } = await startGrpcService({
    name: "export",
    settings: config,
    log,
    pool,
    serverOptions: { "grpc.max_send_message_length": 16 * 1024 * 1024 },
    implement: (metrics) => [
      {
        service: ExportService,
        impl: {
          exportCsv: exportCsvHandler({
            pool,
            codec: new CursorCodec({ keyring: config.CURSOR_KEYS, version: options.cursorVersion }),
            logger: log,
            syncRegistry,
            chunkBytes: config.EXPORT_CHUNK_BYTES,
            metrics,
          }),
        },
      },
    ],
    release: () => schema?.close(),
  });
  return { port, metricsPort, stop };
}
