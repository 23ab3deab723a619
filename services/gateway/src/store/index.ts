import { z } from "zod";
import { env } from "@exportsvc/common";
import { createMemoryStore } from "./memory";
import { createRedisStore } from "./redis";
import type { Clock, SharedStore } from "./types";

export * from "./types";
export { createMemoryStore } from "./memory";
export { createRedisStore } from "./redis";
export { withLocalFallback, type FallbackRouter } from "./fallback";

export interface SharedStoreOptions {
  /** Redis URL; without it the store lives in this process (one replica only). */
  redisUrl?: string;
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Clock of the in-process store (the Redis store uses the Redis server's time). */
  clock?: Clock;
  onError?: (err: Error) => void;
}

export function createSharedStore(options: SharedStoreOptions = {}): SharedStore {
  if (options.redisUrl) {
    return createRedisStore({
      url: options.redisUrl,
      commandTimeoutMs: options.commandTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      onError: options.onError,
    });
  }
  return createMemoryStore({ clock: options.clock });
}

/** Variables of the shared store, for the gateway's configuration schema. */
export const sharedStoreConfigSchema = z.object({
  REDIS_URL: env
    .optionalString()
    .refine((v) => v === undefined || /^rediss?:\/\//.test(v), "must be a redis:// or rediss:// URL"),
  REDIS_COMMAND_TIMEOUT_MS: env.int(500, 10, 60_000),
});

export type SharedStoreConfig = z.infer<typeof sharedStoreConfigSchema>;

export function sharedStoreOptionsFromConfig(config: SharedStoreConfig): SharedStoreOptions {
  return { redisUrl: config.REDIS_URL, commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS };
}
