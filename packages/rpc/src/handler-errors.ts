import { AppError, Errors, type Logger } from "@exportsvc/common";

/** Runs a handler body named `what` (for logs), letting only typed AppErrors out. */
export type HandlerErrorMapping = <T>(what: string, body: () => Promise<T>) => Promise<T>;

/**
 * Handler error mapping for a service: AppErrors pass unchanged, failures `isUnavailable`
 * recognises (a database out of reach) become the typed 503 with a warning, and anything else is
 * logged in full and becomes a bare 500, so no internals reach the client.
 */
export function handlerErrorMapping(log: Logger, isUnavailable: (err: unknown) => boolean): HandlerErrorMapping {
  return async (what, body) => {
    try {
      return await body();
    } catch (err) {
      if (err instanceof AppError) throw err;
      if (isUnavailable(err)) {
        log.warn({ err }, `${what}: database unavailable`);
        throw Errors.databaseUnavailable();
      }
      log.error({ err }, `${what} failed`);
      throw Errors.internal();
    }
  };
}
