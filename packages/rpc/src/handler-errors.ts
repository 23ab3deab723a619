import { AppError, Errors } from "@exportsvc/common";

/**
 * How a service's handlers fail besides AppErrors, which reach the client whole. `serve` applies it
 * to every method of the service, so handlers are plain functions of (request, call) that throw.
 */
export interface HandlerErrorPolicy {
  /**
   * Failures that mean the service's database is out of reach (e.g. @exportsvc/db's
   * isDatabaseUnavailable): answered 503 DATABASE_UNAVAILABLE, so clients retry.
   */
  unavailable?: (err: unknown) => boolean;
}

/** What a call answers for what its handler threw, and the cause to log when it is not that error itself. */
export interface HandlerFailure {
  answer: AppError;
  /** The thrown value the answer replaces (a database out of reach, a bug); undefined for an AppError. */
  cause?: unknown;
}

/**
 * The one error policy of the gRPC handlers: an AppError passes unchanged; a failure the policy
 * recognises as the database out of reach becomes the typed 503; anything else is a bare 500, so no
 * internals reach the client (addService logs the cause with the call's trace id).
 */
export function handlerFailure(err: unknown, policy: HandlerErrorPolicy = {}): HandlerFailure {
  if (err instanceof AppError) return { answer: err };
  if (policy.unavailable?.(err)) return { answer: Errors.databaseUnavailable(), cause: err };
  return { answer: Errors.internal(), cause: err };
}
