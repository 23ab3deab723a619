import { AppError, Errors, type Logger } from "@exportsvc/common";

/** Runs a handler body named `what` (for logs), letting only typed AppErrors out. */
export type HandlerErrorMapping = <T>(what: string, body: () => Promise<T>) => Promise<T>;

/** Runs one step of a handler, mapping an unreachable database to the typed 503. */
export type UnavailableMapping = <T>(step: () => Promise<T>) => Promise<T>;

/**
 * The one place an unreachable database becomes 503 DATABASE_UNAVAILABLE: failures `isUnavailable`
 * recognises are replaced by the typed error; AppErrors and anything else pass unchanged (what
 * addService answers as a logged 500). For handlers that map their other failures themselves.
 */
export function unavailableMapping(isUnavailable: (err: unknown) => boolean): UnavailableMapping {
  return async (step) => {
    try {
      return await step();
    } catch (err) {
      if (!(err instanceof AppError) && isUnavailable(err)) throw Errors.databaseUnavailable();
      throw err;
    }
  };
}

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
