export { createApp, type AppDependencies, DEFAULT_CSV_HEAD_BYTES } from "./app";
export { loadGatewayConfig, gatewayConfigSchema, type GatewayConfig } from "./config";
export { buildOpenApiDocument, ERROR_CODES } from "./openapi/document";
export type { Authenticator, RateLimiter, Admission, Principal } from "./contracts";
