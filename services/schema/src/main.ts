import { createLogger, initTelemetry, runMain, type Logger } from "@exportsvc/common";
import { loadSchemaConfig, type SchemaConfig } from "./config";
import type { RunningSchemaService } from "./server";

export type { SchemaConfig } from "./config";
export type { RunningSchemaService } from "./server";

/**
 * Starts the service. The implementation is loaded on first call so that tracing can start before
 * grpc-js and pg are required (instrumentation patches them on load).
 */
export async function start(config: SchemaConfig, options: { log?: Logger } = {}): Promise<RunningSchemaService> {
  const server = require("./server") as typeof import("./server");
  return server.start(config, options);
}

if (require.main === module) {
  runMain(async () => {
    const config = loadSchemaConfig();
    const telemetry = initTelemetry("schema");
    const log = createLogger("schema", config.LOG_LEVEL);
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
