export * from "./errors";
export * from "./config";
export * from "./logger";
export * from "./apikeys";
export * from "./metrics";
export * from "./telemetry";
export * from "./health";
export * from "./service-main";
