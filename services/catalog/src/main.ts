import { createLogger, initTelemetry, runMain, type Logger } from "@exportsvc/common";
import { loadCatalogConfig, type CatalogConfig } from "./config";
import type { RunningCatalogService } from "./server";

export type { CatalogConfig } from "./config";
export type { RunningCatalogService } from "./server";

/**
 * Starts the service. The implementation is loaded on first call so that tracing can start before
 * grpc-js and pg are required (instrumentation patches them on load).
 */
export async function start(config: CatalogConfig, options: { log?: Logger } = {}): Promise<RunningCatalogService> {
  const server = require("./server") as typeof import("./server");
  return server.start(config, options);
}

if (require.main === module) {
  runMain(async () => {
    const config = loadCatalogConfig();
    const telemetry = initTelemetry("catalog");
    const log = createLogger("catalog", config.LOG_LEVEL);
    const service = await start(config, { log });
    const onSignal = (signal: NodeJS.Signals) => {
      log.info({ signal }, "stopping");
      service
        .stop()
        .then(() => telemetry.shutdown())
        .then(
          () => process.exit(0),
          (err: unknown) => {
            log.error({ err }, "unclean stop");
            process.exit(1);
          },
        );
    };
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
  });
}
