import { z } from "zod";
import { env } from "@exportsvc/common";
import { LIMITS } from "@exportsvc/datasets/src/domain";
import type { RateLimiterOptions } from "./rate-limiter";

/** Variables of the per-organization rate limits, for the gateway's configuration schema. */
export const limitsConfigSchema = z.object({
  RATE_LIMIT_CONCURRENCY: env.int(LIMITS.concurrencyPerOrganization, 1, 10_000),
  RATE_LIMIT_PER_WINDOW: env.int(LIMITS.requestsPerWindow, 1, 1_000_000),
  RATE_LIMIT_WINDOW_SECONDS: env.int(LIMITS.windowSeconds, 1, 86_400),
  RATE_LIMIT_LEASE_SECONDS: env.int(30, 3, 3_600),
});

export type LimitsConfig = z.infer<typeof limitsConfigSchema>;

export function rateLimiterOptionsFromConfig(config: LimitsConfig): RateLimiterOptions {
  return {
    concurrency: config.RATE_LIMIT_CONCURRENCY,
    perWindow: config.RATE_LIMIT_PER_WINDOW,
    windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
    leaseSeconds: config.RATE_LIMIT_LEASE_SECONDS,
  };
}
