import { z } from "zod";
import { env, grpcServiceConfigSchema, parseConfig } from "@exportsvc/common";
// The domain module alone: the package index loads pg, which must be required only after tracing has started.
import { GRPC_PORT, grpcAddress } from "@exportsvc/datasets/src/domain";

export const catalogConfigSchema = grpcServiceConfigSchema({ GRPC_PORT: GRPC_PORT.catalog, DATABASE_POOL_MAX: 10 }).extend({
  /** The schema service, asked to sync an organization's registry before a listing that needs it. */
  SCHEMA_ADDRESS: z.string().min(1).default(grpcAddress("schema")),
  /** Hot standby of DATABASE_URL the listing's registry reads go to once it has caught up (docs/catalog.md). */
  DATABASE_READ_URL: env.optionalString().pipe(z.string().url().optional()),
  /** How long a listing waits for the standby to catch up before it reads the primary instead. */
  READ_REPLICA_MAX_WAIT_MS: env.int(2_000, 0, 60_000),
  /**
   * Bytes of rendered listings kept per process, by organization and listing version, so an
   * unchanged listing is streamed without being built again (docs/catalog.md, "A cheap 304"); 0 keeps none.
   */
  LISTING_CACHE_BYTES: env.int(64 * 1024 * 1024, 0),
  /** Deadline of the SyncDatasets call made for read-your-writes. */
  SCHEMA_SYNC_TIMEOUT_MS: env.int(10_000, 100),
});

export type CatalogConfig = z.infer<typeof catalogConfigSchema>;

export function loadCatalogConfig(source: Record<string, string | undefined> = process.env): CatalogConfig {
  return parseConfig(catalogConfigSchema, source);
}
