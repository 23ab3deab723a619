import { z } from "zod";
import { buildConfigSchema } from "./build-info";
import { env } from "./config";

/**
 * What every gRPC service (catalog, export, schema) reads, with the same names and rules in each:
 * its database and pool, where its server listens, how long a stop lets calls drain, /metrics, the
 * log level and the build it runs (buildConfigSchema, as the gateway's). A service extends it with
 * its own variables (`.extend({...})`); only the defaults that differ between services are parameters. Config keys are the variables' names, in every service.
 */
/**
 * Checkouts after which a pooled PostgreSQL connection is closed and replaced (0: never). A backend
 * keeps a cache entry for every relation it has touched, for as long as it lives; with a schema of
 * tables per organization, a connection that serves every organization in turn grows with the
 * fleet (docs/scale-out.md, "One node's ceiling"). Retiring it after a bounded number of uses
 * bounds that growth at the price of one reconnect per this many uses.
 */
export const DATABASE_POOL_MAX_USES_DEFAULT = 500;

export interface GrpcServiceDefaults {
  GRPC_PORT: number;
  DATABASE_POOL_MAX: number;
  /** Largest DATABASE_POOL_MAX accepted (default 100). */
  DATABASE_POOL_MAX_LIMIT?: number;
}

export function grpcServiceConfigSchema(defaults: GrpcServiceDefaults) {
  return z.object({
    DATABASE_URL: env.url(),
    DATABASE_POOL_MAX: env.int(defaults.DATABASE_POOL_MAX, 1, defaults.DATABASE_POOL_MAX_LIMIT ?? 100),
    DATABASE_POOL_MAX_USES: env.int(DATABASE_POOL_MAX_USES_DEFAULT, 0),
    GRPC_HOST: z.string().min(1).default("0.0.0.0"),
    GRPC_PORT: env.port(defaults.GRPC_PORT),
    /** How long calls in flight may run on after a stop starts before they are cut. */
    SHUTDOWN_GRACE_MS: env.int(10_000, 0),
    /** Port of the Prometheus /metrics endpoint; unset = no metrics server. */
    METRICS_PORT: env.optionalPort(),
    LOG_LEVEL: env.logLevel(),
    ...buildConfigSchema.shape,
  });
}

export type GrpcServiceConfig = z.infer<ReturnType<typeof grpcServiceConfigSchema>>;
