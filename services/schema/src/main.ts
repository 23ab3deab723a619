import { createLogger, runMain } from "@exportsvc/common";
import { loadSchemaConfig } from "./config";
import { start } from "./server";

export { start } from "./server";
export type { SchemaConfig } from "./config";

async function main(): Promise<void> {
  const config = loadSchemaConfig();
  const log = createLogger("schema", config.LOG_LEVEL);
  const service = await start(config, { log });
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, "stopping");
    service.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, "unclean stop");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
}

if (require.main === module) runMain(main);
