import { z } from "zod";
import { env, parseConfig } from "@exportsvc/common";
import { authConfigSchema, type AuthConfig } from "./auth/config";
import { limitsConfigSchema, type LimitsConfig } from "./limits/config";
import { sharedStoreConfigSchema, type SharedStoreConfig } from "./store";

/** The HTTP layer's own variables (limits and the shared store contribute theirs below). */
const httpConfigSchema = z.object({
  PORT: env.port(8080),
  HOST: z.string().min(1).default("0.0.0.0"),
  CATALOG_ADDRESS: z.string().min(1).default("127.0.0.1:50052"),
  EXPORT_ADDRESS: z.string().min(1).default("127.0.0.1:50053"),
  DATABASE_URL: env.url(),
  // Key checks (cached) and readiness probes only: a small pool suffices.
  DATABASE_POOL_MAX: env.int(10, 1, 100),
  KEY_HASH_SECRET: z.string().min(1, "is required"),
  IMAGE_TAG: z.string().default("dev"),
  GIT_COMMIT: z.string().default("unknown"),
  // ISO 8601; a build that does not stamp one (a developer machine) reports its start-up time.
  BUILD_DATE: z
    .string()
    .refine((v) => !Number.isNaN(Date.parse(v)), "must be an ISO 8601 date-time")
    .default(() => new Date().toISOString()),
  APP_VERSION: z.string().default(process.env.npm_package_version ?? "0.1.0"),
  LOG_LEVEL: env.logLevel(),
  SHUTDOWN_GRACE_MS: env.int(25_000, 0, 600_000),
  READINESS_TIMEOUT_MS: env.int(2_000, 100, 60_000),
  KEY_STORE_TIMEOUT_MS: env.int(3_000, 100, 60_000),
  CATALOG_DEADLINE_MS: env.int(10_000, 100, 600_000),
  GZIP_LEVEL: env.int(1, 1, 9),
  PROBLEM_TYPE_BASE_URL: env.optionalString(),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
});

export const gatewayConfigSchema = httpConfigSchema
  .extend(authConfigSchema.shape)
  .extend(limitsConfigSchema.shape)
  .extend(sharedStoreConfigSchema.shape);

export interface GatewayConfig {
  port: number;
  host: string;
  catalogAddress: string;
  exportAddress: string;
  databaseUrl: string;
  databasePoolMax: number;
  keyHashSecret: string;
  build: { imageTag: string; commit: string; buildDate: string; version: string };
  logLevel: string;
  shutdownGraceMs: number;
  readinessTimeoutMs: number;
  /** Statement timeout of the key store pool: a slower look-up is AUTH_UNAVAILABLE. */
  keyStoreTimeoutMs: number;
  catalogDeadlineMs: number;
  gzipLevel: number;
  problemTypeBaseUrl?: string;
  metricsPort?: number;
  auth: AuthConfig;
  limits: LimitsConfig;
  store: SharedStoreConfig;
}

export function loadGatewayConfig(source: Record<string, string | undefined> = process.env): GatewayConfig {
  const e = parseConfig(gatewayConfigSchema, source);
  return {
    port: e.PORT,
    host: e.HOST,
    catalogAddress: e.CATALOG_ADDRESS,
    exportAddress: e.EXPORT_ADDRESS,
    databaseUrl: e.DATABASE_URL,
    databasePoolMax: e.DATABASE_POOL_MAX,
    keyHashSecret: e.KEY_HASH_SECRET,
    build: { imageTag: e.IMAGE_TAG, commit: e.GIT_COMMIT, buildDate: e.BUILD_DATE, version: e.APP_VERSION },
    logLevel: e.LOG_LEVEL,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    readinessTimeoutMs: e.READINESS_TIMEOUT_MS,
    keyStoreTimeoutMs: e.KEY_STORE_TIMEOUT_MS,
    catalogDeadlineMs: e.CATALOG_DEADLINE_MS,
    gzipLevel: e.GZIP_LEVEL,
    problemTypeBaseUrl: e.PROBLEM_TYPE_BASE_URL,
    metricsPort: e.METRICS_PORT,
    auth: authConfigSchema.parse(e),
    limits: limitsConfigSchema.parse(e),
    store: sharedStoreConfigSchema.parse(e),
  };
}
