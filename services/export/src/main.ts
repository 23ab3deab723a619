import { createLogger, runMain } from "@exportsvc/common";
import { createPool } from "@exportsvc/db";
import { CursorCodec } from "@exportsvc/datasets";
import { SchemaService } from "@exportsvc/proto";
import { createClient, listen, shutdown } from "@exportsvc/rpc";
import { loadExportConfig, type ExportConfig } from "./config";
import { createExportServer } from "./server";

export interface RunningExportService {
  port: number;
  stop(): Promise<void>;
}

export interface StartOverrides {
  /** Replaces the SyncDatasets call (tests). */
  syncRegistry?: (organizationId: string) => Promise<void>;
  /** Issues cursors of another version (tests of version retirement). */
  cursorVersion?: number;
}

/** Starts the export service in this process (main, and in-process tests). */
export async function start(config: ExportConfig, overrides: StartOverrides = {}): Promise<RunningExportService> {
  const logger = createLogger("export", config.LOG_LEVEL);
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DB_POOL_MAX, applicationName: "exportsvc-export" });
  const schema = config.SCHEMA_ADDRESS ? createClient(SchemaService, config.SCHEMA_ADDRESS) : undefined;
  const syncRegistry =
    overrides.syncRegistry ??
    (schema
      ? async (organizationId: string) => {
          await schema.syncDatasets({ organizationId }, { deadlineMs: 30_000 });
        }
      : undefined);
  const server = createExportServer({
    pool,
    codec: new CursorCodec({ keyring: config.CURSOR_KEYS, version: overrides.cursorVersion }),
    logger,
    syncRegistry,
    chunkBytes: config.EXPORT_CHUNK_BYTES,
  });
  const port = await listen(server, `${config.GRPC_HOST}:${config.GRPC_PORT}`);
  logger.info({ port }, "export service listening");
  let stopped: Promise<void> | undefined;
  return {
    port,
    stop: () =>
      (stopped ??= (async () => {
        await shutdown(server, config.SHUTDOWN_GRACE_MS);
        schema?.close();
        await pool.end();
      })()),
  };
}

if (require.main === module) {
  runMain(async () => {
    const service = await start(loadExportConfig());
    const stop = () => {
      void service.stop().then(() => process.exit(0));
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
}
