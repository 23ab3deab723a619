import { z } from "zod";
import { env } from "./config";

/**
 * The variables that say which build is running, part of every service's configuration (the
 * gateway's and grpcServiceConfigSchema), so all four read them once, when the configuration is
 * parsed, with one precedence: what the deployment sets wins (the image stamps IMAGE_TAG,
 * GIT_COMMIT and BUILD_DATE; APP_VERSION), then what the toolchain knows (npm's package version),
 * then a placeholder that says the build is not stamped (docs/architecture.md, "One runtime").
 */
export const buildConfigSchema = z.object({
  IMAGE_TAG: z.string().default("dev"),
  GIT_COMMIT: z.string().default("unknown"),
  // ISO 8601; a build that does not stamp one (a developer machine) reports its start-up time.
  BUILD_DATE: z
    .string()
    .refine((v) => !Number.isNaN(Date.parse(v)), "must be an ISO 8601 date-time")
    .default(() => new Date().toISOString()),
  APP_VERSION: env.optionalString(),
  // Set by npm for the package it runs (npm start, workspaces); absent in an image.
  npm_package_version: env.optionalString(),
});

export type BuildConfig = z.infer<typeof buildConfigSchema>;

/** The running build: what the gateway's GET /build serves and every service's build_info exports. */
export interface BuildIdentity {
  imageTag: string;
  commit: string;
  buildDate: string;
  version: string;
}

/** The build the configuration names; the version is APP_VERSION, else npm's package version, else 0.1.0. */
export function buildIdentity(config: BuildConfig): BuildIdentity {
  const version = config.APP_VERSION ?? config.npm_package_version ?? "0.1.0";
  return { imageTag: config.IMAGE_TAG, commit: config.GIT_COMMIT, buildDate: config.BUILD_DATE, version };
}
