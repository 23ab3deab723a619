import { z } from "zod";
import { ConfigError, env, grpcServiceConfigSchema, parseConfig } from "@exportsvc/common";
// The cursor module alone: the package index loads pg, which must be required only after tracing
// has started (see packages/common/src/telemetry.ts).
import { CursorKeyring } from "@exportsvc/datasets/src/cursor";
import { GRPC_PORT, grpcAddress, LIMITS, STREAM_STALL_TIMEOUT_MS } from "@exportsvc/datasets/src/domain";

/** DATABASE_POOL_MAX: connections per replica, one per export in flight (registry look-ups run on the same share). */
export const exportConfigSchema = grpcServiceConfigSchema({ GRPC_PORT: GRPC_PORT.export, DATABASE_POOL_MAX: 16, DATABASE_POOL_MAX_LIMIT: 200 }).extend({
  /**
   * Hot standby of DATABASE_URL that pages are read from; the horizon is still computed on the
   * primary and a page waits until the standby has replayed past it (docs/export.md). Unset: primary.
   */
  DATABASE_READ_URL: env.optionalString().pipe(z.string().url().optional()),
  /** How long a page waits for the standby to catch up before it is read from the primary instead. */
  READ_REPLICA_MAX_WAIT_MS: env.int(2_000, 0, 60_000),
  /** Schema service (SyncDatasets when the registry is stale); empty disables the call. */
  SCHEMA_ADDRESS: z.string().default(grpcAddress("schema")),
  /** `<id>:<secret>` entries, comma-separated; the first signs, all verify (docs/cursor.md). */
  CURSOR_KEYS: env.parsed(CursorKeyring.parse),
  /**
   * Connections of this replica one organization may hold at once (unset: the gateway's default
   * per-organization concurrency, 5, but at most DATABASE_POOL_MAX - 1). Must stay below
   * DATABASE_POOL_MAX so that other organizations always find one (docs/deployment.md).
   */
  DATABASE_CONNECTIONS_PER_ORGANIZATION: z.preprocess((v) => (v === "" ? undefined : v), z.coerce.number().int().min(1).max(200).optional()),
  /**
   * A page whose consumer accepts no bytes for this long is aborted: its query is cancelled and its
   * connection freed. Also the longest wait for a connection share before 503 DATABASE_UNAVAILABLE.
   */
  STREAM_STALL_TIMEOUT_MS: env.int(STREAM_STALL_TIMEOUT_MS, 1_000, 3_600_000),
  /** Deadline of the SyncDatasets call made for read-your-writes. */
  SCHEMA_SYNC_TIMEOUT_MS: env.int(10_000, 100),
  /** Size of the gRPC messages carrying CSV bytes. */
  EXPORT_CHUNK_BYTES: env.int(64 * 1024, 1024, 4 * 1024 * 1024),
});

export type ExportConfig = z.infer<typeof exportConfigSchema>;

/** The per-organization connection cap the gateway's default concurrency calls for: one per request in flight. */
const DEFAULT_CONNECTIONS_PER_ORGANIZATION = LIMITS.concurrencyPerOrganization;

/**
 * Connections one organization may hold: DATABASE_CONNECTIONS_PER_ORGANIZATION, else 5 but at most
 * DATABASE_POOL_MAX - 1. Throws a ConfigError when it leaves no connection to other organizations.
 */
export function connectionsPerOrganization(config: Pick<ExportConfig, "DATABASE_POOL_MAX" | "DATABASE_CONNECTIONS_PER_ORGANIZATION">): number {
  const pool = config.DATABASE_POOL_MAX;
  // A pool of one (a development setting) cannot be shared: its single connection is everyone's.
  const ceiling = pool === 1 ? 1 : pool - 1;
  const perOrganization = config.DATABASE_CONNECTIONS_PER_ORGANIZATION ?? Math.min(DEFAULT_CONNECTIONS_PER_ORGANIZATION, ceiling);
  if (perOrganization > ceiling) {
    throw new ConfigError([
      `DATABASE_CONNECTIONS_PER_ORGANIZATION: must be below DATABASE_POOL_MAX (${pool}) so that other organizations always find a connection`,
    ]);
  }
  return perOrganization;
}

export function loadExportConfig(source: Record<string, string | undefined> = process.env): ExportConfig {
  const config = parseConfig(exportConfigSchema, source);
  connectionsPerOrganization(config);
  return config;
}
