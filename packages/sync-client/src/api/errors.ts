/**
 * What can go wrong talking to the export API, as values the engine branches on (status and
 * errorCode, never the prose of title/detail).
 */
export interface Problem {
  status: number;
  errorCode?: string;
  title?: string;
  detail?: string;
  traceId?: string;
}

/** A non-2xx answer that the retry policy did not (or no longer) retry. */
export class ApiError extends Error {
  readonly status: number;
  readonly errorCode: string | undefined;
  readonly traceId: string | undefined;
  constructor(
    readonly request: string,
    readonly problem: Problem,
  ) {
    const code = problem.errorCode ? ` ${problem.errorCode}` : "";
    const detail = problem.detail ?? problem.title ?? "";
    super(`${request}: HTTP ${problem.status}${code}${detail ? `: ${detail}` : ""}${problem.traceId ? ` (traceId ${problem.traceId})` : ""}`);
    this.name = "ApiError";
    this.status = problem.status;
    this.errorCode = problem.errorCode;
    this.traceId = problem.traceId;
  }
}

/**
 * A 200 CSV response whose body did not end cleanly (connection aborted, truncated record). The
 * page is failed and is retried from the same cursor.
 */
export class StreamAbortedError extends Error {
  constructor(
    readonly request: string,
    readonly bytesRead: number,
    cause: unknown,
  ) {
    super(`${request}: the CSV stream ended without a clean end of body after ${bytesRead} bytes (${(cause as Error)?.message ?? cause})`);
    this.name = "StreamAbortedError";
  }
}

/** The retry policy gave up on transient failures (5xx, network errors, 429s past the wait budget). */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly request: string,
    readonly attempts: number,
    readonly last: unknown,
  ) {
    super(`${request}: gave up after ${attempts} attempts (${(last as Error)?.message ?? last})`);
    this.name = "RetriesExhaustedError";
  }
}

export const isApiError = (err: unknown, status?: number, errorCode?: string): err is ApiError =>
  err instanceof ApiError && (status === undefined || err.status === status) && (errorCode === undefined || err.errorCode === errorCode);
