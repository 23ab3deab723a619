import { z } from "zod";
import { env } from "@exportsvc/common";
import type { AuthenticatorOptions } from "./authenticator";

/** Variables of API key checking, for the gateway's configuration schema. */
export const authConfigSchema = z.object({
  AUTH_SUCCESS_TTL_SECONDS: env.int(60, 1, 3_600),
  AUTH_REJECTION_TTL_SECONDS: env.int(30, 1, 3_600),
  AUTH_UNAVAILABLE_RETRY_AFTER_SECONDS: env.int(5, 1, 3_600),
});

export type AuthConfig = z.infer<typeof authConfigSchema>;

export function authenticatorTimingsFromConfig(
  config: AuthConfig,
): Pick<AuthenticatorOptions, "successTtlSeconds" | "rejectionTtlSeconds" | "unavailableRetryAfterSeconds"> {
  return {
    successTtlSeconds: config.AUTH_SUCCESS_TTL_SECONDS,
    rejectionTtlSeconds: config.AUTH_REJECTION_TTL_SECONDS,
    unavailableRetryAfterSeconds: config.AUTH_UNAVAILABLE_RETRY_AFTER_SECONDS,
  };
}
