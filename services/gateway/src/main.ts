import { runService } from "@exportsvc/common";
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
  // The gateway logs through its own logger; the one runService passes only reports the stop.
  runService({ name: "gateway", loadConfig: loadGatewayConfig, logLevel: (config) => config.logLevel, start: (config) => start(config) });
}
