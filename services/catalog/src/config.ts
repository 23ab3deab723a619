import { z } from "zod";
import { env, parseConfig } from "@exportsvc/common";

export const catalogConfigSchema = z.object({
  DATABASE_URL: env.url(),
  GRPC_HOST: z.string().min(1).default("0.0.0.0"),
  GRPC_PORT: env.port(50052),
  /** The schema service, asked to sync an organization's registry before a listing that needs it. */
  SCHEMA_ADDRESS: z.string().min(1).default("127.0.0.1:50054"),
  LOG_LEVEL: env.logLevel(),
  SHUTDOWN_GRACE_MS: env.int(10_000, 0),
  /** Port of the Prometheus /metrics endpoint; unset = no metrics server. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  DATABASE_POOL_MAX: env.int(10, 1, 100),
  /** Deadline of the SyncDatasets call made for read-your-writes. */
  SCHEMA_SYNC_TIMEOUT_MS: env.int(10_000, 100),
});

export type CatalogConfig = z.infer<typeof catalogConfigSchema>;

export function loadCatalogConfig(source: Record<string, string | undefined> = process.env): CatalogConfig {
  return parseConfig(catalogConfigSchema, source);
}
