export * from "./errors";
export * from "./config";
export * from "./logger";
export * from "./apikeys";
