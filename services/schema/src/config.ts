import { z } from "zod";
import { env, parseConfig } from "@exportsvc/common";

export const schemaConfigSchema = z.object({
  DATABASE_URL: env.url(),
  GRPC_HOST: z.string().min(1).default("0.0.0.0"),
  GRPC_PORT: env.port(50054),
  LOG_LEVEL: env.logLevel(),
  /** Fallback polling of registry_sync_queue when a NOTIFY is missed (listener down, replica start). */
  REGISTRY_POLL_MS: env.int(2000, 50),
  SHUTDOWN_GRACE_MS: env.int(10_000, 0),
  /** Port of the Prometheus /metrics endpoint; unset = no metrics server. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  DATABASE_POOL_MAX: env.int(5, 1, 100),
  /**
   * Run the form-dataset maintenance loop (@exportsvc/form-datasets: rebuilds on publish/rename,
   * submission changes into the materialized tables). Every replica may run it; consumers share the
   * change log safely. Turn off only where something else maintains form datasets (e.g. tests).
   */
  FORM_DATASETS_MAINTENANCE: env.bool(true),
  /** Fallback polling of the form-dataset change log when a NOTIFY is missed. */
  FORM_DATASETS_POLL_MS: env.int(1000, 50),
  /**
   * Tables of one form a rebuild renders at once: the rebuild's own connection plus N-1 helper
   * connections opened for the rebuild's duration, outside the pool (1 = one table at a time).
   */
  FORM_REBUILD_PARALLELISM: env.int(3, 1, 16),
});

export type SchemaConfig = z.infer<typeof schemaConfigSchema>;

export function loadSchemaConfig(source: Record<string, string | undefined> = process.env): SchemaConfig {
  return parseConfig(schemaConfigSchema, source);
}
