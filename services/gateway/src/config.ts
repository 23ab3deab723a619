import { z } from "zod";
import { env, parseConfig } from "@exportsvc/common";

/** Every environment variable of the gateway, parsed once at start-up. */
export const gatewayConfigSchema = z.object({
  PORT: env.port(8080),
  HOST: z.string().min(1).default("0.0.0.0"),
  CATALOG_ADDRESS: z.string().min(1).default("127.0.0.1:50052"),
  EXPORT_ADDRESS: z.string().min(1).default("127.0.0.1:50053"),
  DATABASE_URL: env.url(),
  REDIS_URL: env.optionalString(),
  KEY_HASH_SECRET: z.string().min(1, "is required"),
  IMAGE_TAG: z.string().default("dev"),
  GIT_COMMIT: z.string().default("unknown"),
  BUILD_DATE: z.string().default("unknown"),
  LOG_LEVEL: env.logLevel(),
  SHUTDOWN_GRACE_MS: env.int(25_000, 0, 600_000),
  READINESS_TIMEOUT_MS: env.int(2_000, 100, 60_000),
  CSV_GZIP_LEVEL: env.int(1, 1, 9),
  PROBLEM_TYPE_BASE_URL: env.optionalString(),
});

export type GatewayEnv = z.infer<typeof gatewayConfigSchema>;

export interface GatewayConfig {
  port: number;
  host: string;
  catalogAddress: string;
  exportAddress: string;
  databaseUrl: string;
  redisUrl?: string;
  keyHashSecret: string;
  build: { imageTag: string; commit: string; buildDate: string };
  logLevel: string;
  shutdownGraceMs: number;
  readinessTimeoutMs: number;
  gzipLevel: number;
  problemTypeBaseUrl?: string;
}

export function loadGatewayConfig(source: Record<string, string | undefined> = process.env): GatewayConfig {
  const e = parseConfig(gatewayConfigSchema, source);
  return {
    port: e.PORT,
    host: e.HOST,
    catalogAddress: e.CATALOG_ADDRESS,
    exportAddress: e.EXPORT_ADDRESS,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    keyHashSecret: e.KEY_HASH_SECRET,
    build: { imageTag: e.IMAGE_TAG, commit: e.GIT_COMMIT, buildDate: e.BUILD_DATE },
    logLevel: e.LOG_LEVEL,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    readinessTimeoutMs: e.READINESS_TIMEOUT_MS,
    gzipLevel: e.CSV_GZIP_LEVEL,
    problemTypeBaseUrl: e.PROBLEM_TYPE_BASE_URL,
  };
}
