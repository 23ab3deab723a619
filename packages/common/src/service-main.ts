import { runMain } from "./config";
import { createLogger, type Logger } from "./logger";
import { initTelemetry } from "./telemetry";

/** What a service's start() resolves with: something that stops gracefully. */
export interface StoppableService {
  stop(): Promise<void>;
}

export interface ServiceMainOptions<Config, Service extends StoppableService> {
  /** Service name for traces and logs ("catalog", "gateway", ...). */
  name: string;
  /** Parses the environment; a ConfigError here ends the process before anything else starts. */
  loadConfig: () => Config;
  logLevel: (config: Config) => string;
  /**
   * Starts the service. It must load the modules that instrumentation patches (grpc-js, pg, koa)
   * only when called: tracing starts between loadConfig and start.
   */
  start: (config: Config, log: Logger) => Promise<Service>;
}

/**
 * A service process's main: configuration (fail fast), then tracing, then the service; SIGTERM or
 * SIGINT stops it gracefully, flushes traces and exits (1 when the stop failed).
 */
export function runService<Config, Service extends StoppableService>(options: ServiceMainOptions<Config, Service>): void {
  runMain(async () => {
    const config = options.loadConfig();
    const telemetry = initTelemetry(options.name);
    const log = createLogger(options.name, options.logLevel(config));
    const service = await options.start(config, log);
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
