export { createAuthenticator, type AuthenticatorOptions, type ManagedAuthenticator } from "./authenticator";
export { authConfigSchema, authenticatorTimingsFromConfig, type AuthConfig } from "./config";
export { bearerSecret } from "./bearer";
export type { KeyStoreQueryable as Queryable } from "@exportsvc/db";
