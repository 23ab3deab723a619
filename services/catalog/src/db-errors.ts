import { AppError, Errors, type Logger } from "@exportsvc/common";
import { isDatabaseUnavailable } from "@exportsvc/db";

/** Runs a handler body, turning database trouble into the typed 503 and anything unexpected into a logged 500. */
export async function withErrorMapping<T>(log: Logger, what: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (isDatabaseUnavailable(err)) {
      log.warn({ err }, `${what}: database unavailable`);
      throw Errors.databaseUnavailable();
    }
    log.error({ err }, `${what} failed`);
    throw Errors.internal();
  }
}
