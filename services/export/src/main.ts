import { createLogger, initTelemetry, runMain } from "@exportsvc/common";
import { loadExportConfig, type ExportConfig } from "./config";
import type { RunningExportService, StartOptions } from "./server";

export type { ExportConfig } from "./config";
export type { RunningExportService, StartOptions } from "./server";

/**
 * Starts the service. The implementation is loaded on first call so that tracing can start before
 * grpc-js and pg are required (instrumentation patches them on load).
 */
export async function start(config: ExportConfig, options: StartOptions = {}): Promise<RunningExportService> {
  const server = require("./server") as typeof import("./server");
  return server.start(config, options);
}

if (require.main === module) {
  runMain(async () => {
    const config = loadExportConfig();
    const telemetry = initTelemetry("export");
    const log = createLogger("export", config.LOG_LEVEL);
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
