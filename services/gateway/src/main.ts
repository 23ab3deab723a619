import { runService } from "@exportsvc/common";
import { loadGatewayConfig } from "./config";
import { start } from "./server";

/**
 * The gateway process: configuration (fail fast, naming the variable), then the HTTP server;
 * SIGTERM or SIGINT stops it gracefully. Run it as `node --import ./src/tracing.ts src/main.ts` (in
 * the image, dist/tracing.js and dist/main.js): tracing must be running before ./server loads koa,
 * grpc-js and pg, which instrumentation patches as they load.
 */
if (require.main === module) {
  // The gateway logs through its own logger; the one runService passes only reports the stop.
  runService({ name: "gateway", loadConfig: loadGatewayConfig, logLevel: (config) => config.LOG_LEVEL, start: (config) => start(config) });
}
