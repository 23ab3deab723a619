import * as grpc from "@grpc/grpc-js";
import { AppError, Errors, type ProblemFields } from "@exportsvc/common";

/** Metadata key carrying an AppError across gRPC. */
const PROBLEM_KEY = "x-problem-bin";

/**
 * The one mapping between the service's errors and gRPC status codes, by the HTTP status of the
 * AppError: what a call answers on the wire, what grpc_server_handled_total counts and what the
 * `rpc` log line says all come from here. Anything else (a bug, an unmapped status) is INTERNAL.
 */
const GRPC_STATUS_BY_HTTP_STATUS = new Map<number, grpc.status>([
  [400, grpc.status.INVALID_ARGUMENT],
  [401, grpc.status.UNAUTHENTICATED],
  [404, grpc.status.NOT_FOUND],
  [429, grpc.status.RESOURCE_EXHAUSTED],
  [503, grpc.status.UNAVAILABLE],
]);

/** The gRPC status a call that threw `err` answers with. */
export function grpcStatusForError(err: unknown): grpc.status {
  if (!(err instanceof AppError)) return grpc.status.INTERNAL;
  return GRPC_STATUS_BY_HTTP_STATUS.get(err.status) ?? grpc.status.INTERNAL;
}

/** The status code's name as gRPC spells it ("OK", "NOT_FOUND"): metric labels and log fields. */
export function grpcStatusName(code: grpc.status): string {
  return grpc.status[code] ?? "UNKNOWN";
}

/** Turns any thrown value into a gRPC error; AppErrors travel whole, everything else as INTERNAL_ERROR. */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> {
  const app = err instanceof AppError ? err : Errors.internal();
  const metadata = new grpc.Metadata();
  metadata.set(PROBLEM_KEY, Buffer.from(JSON.stringify(app.toFields())));
  return { code: grpcStatusForError(app), details: app.message, metadata };
}

/** Turns a gRPC client error back into the AppError the server raised: a 503 when the transport failed, a 500 for anything that is no gRPC error. */
export function fromServiceError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const se = err as Partial<grpc.ServiceError>;
  const raw = se?.metadata?.get(PROBLEM_KEY)?.[0];
  if (raw) {
    const fields = JSON.parse(Buffer.isBuffer(raw) ? raw.toString("utf8") : String(raw)) as ProblemFields;
    return new AppError(fields);
  }
  // Every answer our servers give carries the problem (toServiceError). A gRPC error without it was
  // made by the transport: the service went away, the connection was cut or reset mid-call
  // (grpc-js reports a reset stream as INTERNAL). Retryable, like an unreachable database.
  if (se?.code !== undefined && se.code !== grpc.status.OK) {
    return Errors.databaseUnavailable("An internal service did not answer. Retry with exponential backoff.");
  }
  return Errors.internal();
}
