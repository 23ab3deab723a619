import { runMain } from "./config";
import { createLogger, endLogs, type Logger } from "./logger";
import { activeTelemetry } from "./telemetry";

/** What a service's start() resolves with: something that stops gracefully. */
export interface StoppableService {
  stop(): Promise<void>;
}

export interface ServiceMainOptions<Config, Service extends StoppableService> {
  /** Service name for logs ("catalog", "gateway", ...). */
  name: string;
  /** Parses the environment; a ConfigError here ends the process before anything else starts. */
  loadConfig: () => Config;
  logLevel: (config: Config) => string;
  start: (config: Config, log: Logger) => Promise<Service>;
}

/**
 * A service process's main (src/main.ts): configuration (fail fast), then the service; SIGTERM or
 * SIGINT stops it gracefully, flushes traces and exits (1 when the stop failed). Further signals
 * during the stop change nothing (it is bounded by the service's own SHUTDOWN_GRACE_MS).
 *
 * Tracing is not started here: the service's src/tracing.ts starts it, loaded by
 * `node --import` before main.ts, so that instrumentation patches grpc-js, pg and koa as they are
 * first required. A process started without it runs untraced, and says so.
 */
export function runService<Config, Service extends StoppableService>(options: ServiceMainOptions<Config, Service>): void {
  runMain(async () => {
    const config = options.loadConfig();
    const log = createLogger(options.name, options.logLevel(config));
    const telemetry = activeTelemetry();
    if (!telemetry) log.warn(`tracing was not preloaded: start with node --import <services/${options.name}>/src/tracing (docs/observability.md)`);
    const service = await options.start(config, log);
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      // One stop per process: a Ctrl-C reaches every process of the terminal's group, and the
      // parent (npm start) then sends its own SIGTERM; a second stop would log into closed logs.
      if (stopping) return;
      stopping = true;
      log.info({ signal }, "stopping");
      service
        .stop()
        .then(() => telemetry?.shutdown())
        .then(
          () => exitAfterLogs(log, 0),
          (err: unknown) => {
            log.error({ err }, "unclean stop");
            exitAfterLogs(log, 1);
          },
        );
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** Exits once every log line is written (endLogs), in the order logged. */
function exitAfterLogs(log: Logger, code: number): void {
  const exit = () => process.exit(code);
  // A destination that broke (stdout closed) may never call back.
  setTimeout(exit, LOG_FLUSH_TIMEOUT_MS);
  endLogs(log, exit);
}

const LOG_FLUSH_TIMEOUT_MS = 2_000;
