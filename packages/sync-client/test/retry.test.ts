import { DEFAULT_RETRY, backoffDelay, decideRetry, parseRetryAfter } from "../src/api/retry";

const first = { failures: 1, retryAfterWaitedMs: 0 };

describe("the retry policy (the retry table of docs/contract.md §10)", () => {
  it("429 and 503 AUTH_UNAVAILABLE wait Retry-After", () => {
    expect(decideRetry(DEFAULT_RETRY, first, { status: 429, errorCode: "RATE_LIMITED", retryAfter: "7" })).toEqual({ retry: true, kind: "retry-after", delayMs: 7000 });
    expect(decideRetry(DEFAULT_RETRY, first, { status: 503, errorCode: "AUTH_UNAVAILABLE", retryAfter: "2" })).toEqual({ retry: true, kind: "retry-after", delayMs: 2000 });
    // No usable Retry-After: the configured default, still a wait rather than a failure.
    expect(decideRetry(DEFAULT_RETRY, first, { status: 429, retryAfter: null })).toMatchObject({ retry: true, delayMs: DEFAULT_RETRY.defaultRetryAfterMs });
  });

  it("Retry-After waits are bounded by a total budget per request", () => {
    const opts = { ...DEFAULT_RETRY, maxRetryAfterWaitMs: 10_000 };
    expect(decideRetry(opts, { failures: 3, retryAfterWaitedMs: 9_000 }, { status: 429, retryAfter: "2" })).toEqual({ retry: false });
  });

  it("DATABASE_UNAVAILABLE, other 5xx and network failures back off exponentially with jitter, bounded in attempts", () => {
    const opts = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000, maxAttempts: 4 };
    for (const failure of [{ status: 503, errorCode: "DATABASE_UNAVAILABLE" }, { status: 500 }, { status: 502 }, {}]) {
      const d1 = decideRetry(opts, { failures: 1, retryAfterWaitedMs: 0 }, failure, () => 1);
      const d3 = decideRetry(opts, { failures: 3, retryAfterWaitedMs: 0 }, failure, () => 1);
      expect(d1).toEqual({ retry: true, kind: "backoff", delayMs: 100 });
      expect(d3).toEqual({ retry: true, kind: "backoff", delayMs: 400 });
      expect(decideRetry(opts, { failures: 4, retryAfterWaitedMs: 0 }, failure)).toEqual({ retry: false });
    }
    // Full jitter between half and the whole step, capped.
    expect(backoffDelay(opts, 10, () => 0)).toBe(500);
    expect(backoffDelay(opts, 10, () => 1)).toBe(1000);
  });

  it("400, 401, 404 and DATASET_NOT_EXPORTABLE are never retried", () => {
    for (const failure of [
      { status: 400, errorCode: "INVALID_CURSOR" },
      { status: 401, errorCode: "UNAUTHORIZED" },
      { status: 404, errorCode: "DATASET_NOT_FOUND" },
      { status: 404, errorCode: "ORGANIZATION_NOT_CONFIGURED" },
      { status: 503, errorCode: "DATASET_NOT_EXPORTABLE" },
    ]) {
      expect(decideRetry(DEFAULT_RETRY, first, failure)).toEqual({ retry: false });
    }
  });

  it("parses Retry-After as seconds or an HTTP date", () => {
    expect(parseRetryAfter("0")).toBe(0);
    expect(parseRetryAfter("12")).toBe(12_000);
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now)).toBe(5000);
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});
