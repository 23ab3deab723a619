import { createLogger, type Logger } from "@exportsvc/common";
import { ConnectionShares, createPool, isDatabaseUnavailable } from "@exportsvc/db";
import { CursorCodec, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";
import { ExportService, SchemaService } from "@exportsvc/proto";
import { createClient, serve, startGrpcService } from "@exportsvc/rpc";
import { connectionsPerOrganization, type ExportConfig } from "./config";
import { exportCsvHandler } from "./handlers/export-csv";
import type { ExportDependencies } from "./pages";
import { exportDeletionsHandler } from "./handlers/export-deletions";
import { exportRewritesHandler } from "./handlers/export-rewrites";
import { SiteCounts } from "./site-counts";
import { FormIdHints } from "./visibility";
import { exposeExportSeries } from "./metrics-series";
import { ExportMetrics } from "./metrics";

/** A site count is read again after a minute: it only chooses between two equal renderings (site-counts.ts). */
const SITE_COUNT_TTL_MS = 60_000;
const SITE_COUNT_MAX_ORGANIZATIONS = 10_000;

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
  const shares = new ConnectionShares({ capacity: config.DATABASE_POOL_MAX, perOrganization: connectionsPerOrganization(config) });
  const pool = createPool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX, maxUses: config.DATABASE_POOL_MAX_USES, applicationName: SERVICE_APPLICATION_NAME.export });
  const readPool = config.DATABASE_READ_URL
    ? createPool({ connectionString: config.DATABASE_READ_URL, max: config.DATABASE_POOL_MAX, maxUses: config.DATABASE_POOL_MAX_USES, applicationName: SERVICE_APPLICATION_NAME.export })
    : undefined;
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
    createMetrics: (metricsOptions) => new ExportMetrics(metricsOptions),
    serverOptions: { "grpc.max_send_message_length": 16 * 1024 * 1024 },
    implement: (metrics) => {
      if (readPool) metrics.exposeReplicaFallbacks("page");
      metrics.exposeFormPages();
      exposeExportSeries(metrics);
      const deps: ExportDependencies = {
        pool,
        codec: new CursorCodec({ keyring: config.CURSOR_KEYS, version: options.cursorVersion }),
        logger: log,
        syncRegistry,
        chunkBytes: config.EXPORT_CHUNK_BYTES,
        shares,
        stallTimeoutMs: config.STREAM_STALL_TIMEOUT_MS,
        metrics,
        readReplica: readPool ? { pool: readPool, maxWaitMs: config.READ_REPLICA_MAX_WAIT_MS } : undefined,
        formIdHints: new FormIdHints(),
        siteCounts: new SiteCounts(pool, { ttlMs: SITE_COUNT_TTL_MS, maxOrganizations: SITE_COUNT_MAX_ORGANIZATIONS, logger: log }),
      };
      return [
        serve(
          ExportService,
          { exportCsv: exportCsvHandler(deps), exportDeletions: exportDeletionsHandler(deps), exportRewrites: exportRewritesHandler(deps) },
          { errors: { unavailable: isDatabaseUnavailable } },
        ),
      ];
    },
    release: async () => {
      schema?.close();
      await readPool?.end();
    },
  });
  return { port, metricsPort, stop };
}
