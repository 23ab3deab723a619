import { runService } from "@exportsvc/common";
import { loadCatalogConfig } from "./config";

export type { CatalogConfig } from "./config";
export type { RunningCatalogService } from "./server";

/** Starts the service. ./server loads on first call so that tracing can start before grpc-js and pg load (instrumentation patches them on load). */
export const start: typeof import("./server").start = (config, options) => (require("./server") as typeof import("./server")).start(config, options);

if (require.main === module) {
  runService({ name: "catalog", loadConfig: loadCatalogConfig, logLevel: (config) => config.LOG_LEVEL, start: (config, log) => start(config, { log }) });
}
