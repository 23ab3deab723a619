import { runService } from "@exportsvc/common";
import { loadExportConfig } from "./config";

export type { ExportConfig } from "./config";
export type { RunningExportService, StartOptions } from "./server";

/** Starts the service. ./server loads on first call so that tracing can start before grpc-js and pg load (instrumentation patches them on load). */
export const start: typeof import("./server").start = (config, options) => (require("./server") as typeof import("./server")).start(config, options);

if (require.main === module) {
  runService({ name: "export", loadConfig: loadExportConfig, logLevel: (config) => config.LOG_LEVEL, start: (config, log) => start(config, { log }) });
}
