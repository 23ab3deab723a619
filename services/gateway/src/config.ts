import { z } from "zod";
import { buildConfigSchema, DATABASE_POOL_MAX_USES_DEFAULT, env, parseConfig } from "@exportsvc/common";
// The domain module alone: the package index loads pg, which must be required only after tracing has started.
import { GATEWAY_HTTP_PORT, grpcAddress, STREAM_STALL_TIMEOUT_MS } from "@exportsvc/datasets/src/domain";
import { authConfigSchema } from "./auth/config";
import { limitsConfigSchema } from "./limits/config";
import { sharedStoreConfigSchema } from "./store";
import { DEFAULT_HTTP_LIMITS, type HttpServerLimits } from "./http/limits";

/** The HTTP layer's own variables (the build, auth, limits and the shared store contribute theirs below). */
const httpConfigSchema = z.object({
  PORT: env.port(GATEWAY_HTTP_PORT),
  HOST: z.string().min(1).default("0.0.0.0"),
  CATALOG_ADDRESS: z.string().min(1).default(grpcAddress("catalog")),
  EXPORT_ADDRESS: z.string().min(1).default(grpcAddress("export")),
  DATABASE_URL: env.url(),
  // Key checks (cached) and readiness probes only: a small pool suffices.
  DATABASE_POOL_MAX: env.int(10, 1, 100),
  DATABASE_POOL_MAX_USES: env.int(DATABASE_POOL_MAX_USES_DEFAULT, 0),
  KEY_HASH_SECRET: z.string().min(1, "is required"),
  LOG_LEVEL: env.logLevel(),
  SHUTDOWN_GRACE_MS: env.int(25_000, 0, 600_000),
  READINESS_TIMEOUT_MS: env.int(2_000, 100, 60_000),
  KEY_STORE_TIMEOUT_MS: env.int(3_000, 100, 60_000),
  CATALOG_DEADLINE_MS: env.int(10_000, 100, 600_000),
  GZIP_LEVEL: env.int(1, 1, 9),
  // A CSV response the client accepts no bytes of for this long is aborted: its slot and its export
  // (and the export's database connection) are freed.
  STREAM_STALL_TIMEOUT_MS: env.int(STREAM_STALL_TIMEOUT_MS, 1_000, 3_600_000),
  PROBLEM_TYPE_BASE_URL: env.optionalString(),
  METRICS_PORT: env.optionalPort(),
  // Below the process's descriptor limit, so a flood of idle connections is refused and counted
  // instead of exhausting descriptors (docs/security.md).
  HTTP_MAX_CONNECTIONS: env.int(DEFAULT_HTTP_LIMITS.maxConnections, 1, 1_000_000),
  HTTP_HEADERS_TIMEOUT_MS: env.int(DEFAULT_HTTP_LIMITS.headersTimeoutMs, 1_000, 120_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: env.int(DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs, 1_000, 600_000),
});

export const gatewayConfigSchema = httpConfigSchema
  .extend(buildConfigSchema.shape)
  .extend(authConfigSchema.shape)
  .extend(limitsConfigSchema.shape)
  .extend(sharedStoreConfigSchema.shape);

/** The gateway's configuration: as everywhere, keyed by the variables' names. */
export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;

export function loadGatewayConfig(source: Record<string, string | undefined> = process.env): GatewayConfig {
  return parseConfig(gatewayConfigSchema, source);
}

/** Connection cap and timeouts of the HTTP listener. */
export function httpLimitsFromConfig(config: GatewayConfig): HttpServerLimits {
  return {
    maxConnections: config.HTTP_MAX_CONNECTIONS,
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
  };
}
