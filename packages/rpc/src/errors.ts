import * as grpc from "@grpc/grpc-js";
import { AppError, Errors, type ProblemFields } from "@exportsvc/common";

/** Metadata key carrying an AppError across gRPC. */
const PROBLEM_KEY = "x-problem-bin";

const statusForHttp = (status: number): grpc.status => {
  if (status === 400) return grpc.status.INVALID_ARGUMENT;
  if (status === 401) return grpc.status.UNAUTHENTICATED;
  if (status === 404) return grpc.status.NOT_FOUND;
  if (status === 429) return grpc.status.RESOURCE_EXHAUSTED;
  if (status === 503) return grpc.status.UNAVAILABLE;
  return grpc.status.INTERNAL;
};

/** Turns any thrown value into a gRPC error; AppErrors travel whole, everything else as INTERNAL_ERROR. */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> {
  const app = err instanceof AppError ? err : Errors.internal();
  const metadata = new grpc.Metadata();
  metadata.set(PROBLEM_KEY, Buffer.from(JSON.stringify(app.toFields())));
  return { code: statusForHttp(app.status), details: app.message, metadata };
}

/** Turns a gRPC client error back into the AppError the server raised (or a 503/500 when transport failed). */
export function fromServiceError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const se = err as Partial<grpc.ServiceError>;
  const raw = se?.metadata?.get(PROBLEM_KEY)?.[0];
  if (raw) {
    const fields = JSON.parse(Buffer.isBuffer(raw) ? raw.toString("utf8") : String(raw)) as ProblemFields;
    return new AppError(fields);
  }
  if (se?.code === grpc.status.UNAVAILABLE || se?.code === grpc.status.DEADLINE_EXCEEDED) {
    return Errors.databaseUnavailable("An internal service did not answer. Retry with exponential backoff.");
  }
  return Errors.internal();
}
