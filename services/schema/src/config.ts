import { z } from "zod";
import { env, grpcServiceConfigSchema, parseConfig } from "@exportsvc/common";
import { CursorKeyring, DEFAULT_TOMBSTONE_RETENTION_DAYS, GRPC_PORT } from "@exportsvc/datasets";

export const schemaConfigSchema = grpcServiceConfigSchema({ GRPC_PORT: GRPC_PORT.schema, DATABASE_POOL_MAX: 5 }).extend({
  /** Fallback polling of registry_sync_queue when a NOTIFY is missed (listener down, replica start). */
  REGISTRY_POLL_MS: env.int(2000, 50),
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
  /**
   * Render resource datasets and deviations into tables of their organization's schema, which pages
   * read while they are current (docs/export.md, "Rendered datasets"); off: every page reads live.
   */
  RENDERED_DATASETS: env.bool(true),
  /** How often the schema service looks for rendered datasets behind their sources. */
  RENDERED_DATASETS_INTERVAL_MS: env.int(1000, 50),
  /** Datasets with fewer rows are not rendered (a live page of them is cheap). */
  RENDERED_DATASETS_MIN_ROWS: env.int(5000, 0),
  /** Days a dataset's deletion feed keeps a tombstone before the schema service prunes it. */
  TOMBSTONE_RETENTION_DAYS: env.int(DEFAULT_TOMBSTONE_RETENTION_DAYS, 1, 3650),
  /** Organizations the registry sync queue worker syncs at once (each holds a pool connection). */
  REGISTRY_SYNC_CONCURRENCY: env.int(2, 1, 32),
  /**
   * Workers of the form-dataset maintenance loop (each holds a pool connection while it works, and
   * FORM_REBUILD_PARALLELISM - 1 helpers while it rebuilds); organizations are served round-robin.
   */
  FORM_MAINTENANCE_CONCURRENCY: env.int(3, 1, 32),
  /**
   * The export service's CURSOR_KEYS (same value): form dataset rows are then stored with their
   * signed `_cursor`, which the export serves instead of signing each row on every page. Unset: rows
   * are stored without, and the export signs them (docs/cursor.md, "Stored cursors").
   */
  CURSOR_KEYS: env.optionalParsed(CursorKeyring.parse),
})
  // The loop's LISTEN connection and its workers come from the pool: more workers than connections
  // would only queue on the pool while holding claimed work.
  .refine((c) => !c.FORM_DATASETS_MAINTENANCE || c.FORM_MAINTENANCE_CONCURRENCY + 1 <= c.DATABASE_POOL_MAX, {
    path: ["FORM_MAINTENANCE_CONCURRENCY"],
    message: "needs FORM_MAINTENANCE_CONCURRENCY + 1 <= DATABASE_POOL_MAX (the loop's LISTEN connection and one per worker)",
  })
  .refine((c) => c.REGISTRY_SYNC_CONCURRENCY <= c.DATABASE_POOL_MAX, {
    path: ["REGISTRY_SYNC_CONCURRENCY"],
    message: "needs REGISTRY_SYNC_CONCURRENCY <= DATABASE_POOL_MAX (one pool connection per organization synced)",
  });

export type SchemaConfig = z.infer<typeof schemaConfigSchema>;

export function loadSchemaConfig(source: Record<string, string | undefined> = process.env): SchemaConfig {
  return parseConfig(schemaConfigSchema, source);
}
