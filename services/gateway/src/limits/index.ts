export { createRateLimiter, type RateLimiterOptions } from "./rate-limiter";
export { limitsConfigSchema, rateLimiterOptionsFromConfig, type LimitsConfig } from "./config";
