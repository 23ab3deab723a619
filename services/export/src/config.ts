import { z } from "zod";
import { env, parseConfig } from "@exportsvc/common";
// The cursor module alone: the package index loads pg, which must be required only after tracing
// has started (see packages/common/src/telemetry.ts).
import { CursorKeyring } from "@exportsvc/datasets/src/cursor";

export const exportConfigSchema = z.object({
  DATABASE_URL: env.url(),
  GRPC_HOST: z.string().min(1).default("0.0.0.0"),
  GRPC_PORT: env.port(50053),
  /** Schema service (SyncDatasets when the registry is stale); empty disables the call. */
  SCHEMA_ADDRESS: z.string().default("127.0.0.1:50054"),
  /** `<id>:<secret>` entries, comma-separated; the first signs, all verify (docs/cursor.md). */
  CURSOR_KEYS: z.string().transform((spec, ctx) => {
    try {
      return CursorKeyring.parse(spec);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
  }),
  /** Connections per replica: one per export in flight, plus registry look-ups. */
  DATABASE_POOL_MAX: env.int(10, 1, 200),
  LOG_LEVEL: env.logLevel(),
  SHUTDOWN_GRACE_MS: env.int(10_000, 0),
  /** Deadline of the SyncDatasets call made for read-your-writes. */
  SCHEMA_SYNC_TIMEOUT_MS: env.int(10_000, 100),
  /** Port of the Prometheus /metrics endpoint; unset = no metrics server. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Size of the gRPC messages carrying CSV bytes. */
  EXPORT_CHUNK_BYTES: env.int(64 * 1024, 1024, 4 * 1024 * 1024),
});

export type ExportConfig = z.infer<typeof exportConfigSchema>;

export function loadExportConfig(source: Record<string, string | undefined> = process.env): ExportConfig {
  return parseConfig(exportConfigSchema, source);
}
