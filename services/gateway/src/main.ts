import { initTelemetry, runMain } from "@exportsvc/common";
import { loadGatewayConfig, type GatewayConfig } from "./config";
import type { RunningGateway } from "./gateway";

export type { RunningGateway } from "./gateway";

/**
 * Starts the gateway. The implementation is loaded on first call, so that a process entering here
 * can start tracing before koa, grpc-js and pg are required (instrumentation patches them on load).
 */
export async function start(config: GatewayConfig): Promise<RunningGateway> {
  const { startGateway } = require("./gateway") as typeof import("./gateway");
  return startGateway(config);
}

if (require.main === module) {
  runMain(async () => {
    const config = loadGatewayConfig();
    const telemetry = initTelemetry("gateway");
    const gateway = await start(config);
    const shutdown = () => {
      void gateway
        .stop()
        .then(() => telemetry.shutdown())
        .finally(() => process.exit(0));
    };
    process.once("SIGTERM", shutdown);
    process.once("SIGINT", shutdown);
  });
}
