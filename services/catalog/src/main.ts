import { createLogger, runMain } from "@exportsvc/common";
import { loadCatalogConfig } from "./config";
import { start } from "./server";

export { start } from "./server";
export type { CatalogConfig } from "./config";

async function main(): Promise<void> {
  const config = loadCatalogConfig();
  const log = createLogger("catalog", config.LOG_LEVEL);
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
