import { runService } from "@exportsvc/common";
import { loadSchemaConfig } from "./config";

export type { SchemaConfig } from "./config";
export type { RunningSchemaService } from "./server";

/** Starts the service. ./server loads on first call so that tracing can start before grpc-js and pg load (instrumentation patches them on load). */
export const start: typeof import("./server").start = (config, options) => (require("./server") as typeof import("./server")).start(config, options);

if (require.main === module) {
  runService({ name: "schema", loadConfig: loadSchemaConfig, logLevel: (config) => config.LOG_LEVEL, start: (config, log) => start(config, { log }) });
}
