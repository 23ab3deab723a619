/**
 * The contract's retry table (docs/contract.md §10) as one policy, used for every request the client makes:
 * - 429: wait `Retry-After` seconds, repeat the same request (bounded by a total wait budget);
 * - 503 AUTH_UNAVAILABLE: wait `Retry-After`;
 * - 503 DATABASE_UNAVAILABLE, other 5xx and network failures before a response: exponential
 *   backoff with full jitter, bounded in attempts;
 * - 503 DATASET_NOT_EXPORTABLE, 400, 401, 404 and any other 4xx: never retried.
 * A CSV stream that aborts after its 200 is retried by the engine from the same cursor
 * (`pageAttempts`), because the page's rows must be rolled back first.
 */
export interface RetryOptions {
  /** Attempts for 5xx/network failures (backoff), first attempt included. */
  maxAttempts: number;
  /** First backoff step; doubled per attempt, capped at maxDelayMs, full jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** Total time a single request may spend waiting on 429/AUTH_UNAVAILABLE Retry-After. */
  maxRetryAfterWaitMs: number;
  /** Used when a 429 or AUTH_UNAVAILABLE carries no usable Retry-After. */
  defaultRetryAfterMs: number;
  /** Attempts for one page whose stream aborted after the 200, first attempt included. */
  pageAttempts: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  maxAttempts: 8,
  baseDelayMs: 500,
  maxDelayMs: 30_000,
  maxRetryAfterWaitMs: 15 * 60_000,
  defaultRetryAfterMs: 5_000,
  pageAttempts: 5,
};

export type RetryDecision =
  | { retry: false }
  | { retry: true; kind: "retry-after" | "backoff"; delayMs: number };

export interface Attempt {
  /** 1 for the first failure of a request. */
  failures: number;
  /** Time already spent waiting on Retry-After for this request. */
  retryAfterWaitedMs: number;
}

/** `Retry-After` as seconds (the API sends integers) or an HTTP date. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

export function backoffDelay(opts: RetryOptions, failures: number, random = Math.random): number {
  const ceiling = Math.min(opts.maxDelayMs, opts.baseDelayMs * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/**
 * Whether to retry a failed request. `status` is undefined for a network failure before any
 * response (connection refused or reset), which is treated like a 5xx.
 */
export function decideRetry(
  opts: RetryOptions,
  attempt: Attempt,
  failure: { status?: number; errorCode?: string; retryAfter?: string | null },
  random = Math.random,
): RetryDecision {
  const { status, errorCode } = failure;
  const waitRetryAfter = (): RetryDecision => {
    const delayMs = parseRetryAfter(failure.retryAfter) ?? opts.defaultRetryAfterMs;
    if (attempt.retryAfterWaitedMs + delayMs > opts.maxRetryAfterWaitMs) return { retry: false };
    return { retry: true, kind: "retry-after", delayMs };
  };
  const backoff = (): RetryDecision =>
    attempt.failures >= opts.maxAttempts ? { retry: false } : { retry: true, kind: "backoff", delayMs: backoffDelay(opts, attempt.failures, random) };

  if (status === undefined) return backoff();
  if (status === 429) return waitRetryAfter();
  if (status === 503 && errorCode === "AUTH_UNAVAILABLE") return waitRetryAfter();
  if (status === 503 && errorCode === "DATASET_NOT_EXPORTABLE") return { retry: false };
  if (status >= 500) return backoff();
  return { retry: false };
}
