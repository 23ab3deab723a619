import { runService } from "@exportsvc/common";
import { loadCatalogConfig } from "./config";
import { start } from "./server";

/**
 * The catalog process: configuration (fail fast, naming the variable), then the server; SIGTERM or
 * SIGINT stops it gracefully. Run it as `node --import ./src/tracing.ts src/main.ts` (in the image,
 * dist/tracing.js and dist/main.js): tracing must be running before ./server loads grpc-js and pg,
 * which instrumentation patches as they load.
 */
if (require.main === module) {
  runService({ name: "catalog", loadConfig: loadCatalogConfig, logLevel: (config) => config.LOG_LEVEL, start: (config, log) => start(config, { log }) });
}
