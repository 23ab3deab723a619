/**
 * A typed client of the public HTTP API (listing and CSV pages) with the retry policy applied to
 * every request. It knows nothing of the server's code: only the contract.
 */
import type { Readable } from "node:stream";
import { Agent, request, type Dispatcher } from "undici";
import { ApiError, RetriesExhaustedError, type Problem } from "./errors";
import { DEFAULT_RETRY, backoffDelay, decideRetry, type RetryOptions } from "./retry";
import { normalizeEntry, type ListingEntry } from "./types";

export interface RetryEvent {
  request: string;
  status?: number;
  errorCode?: string;
  kind: "retry-after" | "backoff";
  delayMs: number;
  failures: number;
}

export interface ClientOptions {
  /** The service address, with or without a trailing `/v1`. */
  baseUrl: string;
  apiKey: string;
  retry?: Partial<RetryOptions>;
  onRetry?: (event: RetryEvent) => void;
  userAgent?: string;
  /** Aborts waits between retries (SIGINT/SIGTERM). */
  signal?: AbortSignal;
  /** Abort a CSV response that sends nothing for this long. */
  bodyTimeoutMs?: number;
}

export type ListingResult =
  | { notModified: true; etag: string | undefined }
  | { notModified: false; etag: string | undefined; datasets: ListingEntry[] };

export interface PageResponse {
  body: Readable;
  request: string;
}

export class ExportApiClient {
  readonly retry: RetryOptions;
  private readonly root: string;
  private readonly dispatcher: Dispatcher;

  constructor(private readonly opts: ClientOptions) {
    if (!/^https?:\/\//.test(opts.baseUrl)) throw new Error(`the base URL must start with http:// or https:// (got ${opts.baseUrl})`);
    if (!opts.apiKey.startsWith("ak_")) throw new Error("the API key must be a key secret beginning with ak_");
    // links.csv is rooted at the host and already holds /v1: resolve it against the base without /v1.
    this.root = opts.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.retry = { ...DEFAULT_RETRY, ...(opts.retry ?? {}) };
    this.dispatcher = new Agent({ bodyTimeout: opts.bodyTimeoutMs ?? 120_000, headersTimeout: 300_000, keepAliveTimeout: 10_000 });
  }

  /** The listing; a 304 when `etag` still describes it. */
  async listing(etag?: string): Promise<ListingResult> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (etag) headers["if-none-match"] = etag;
    for (let attempt = 1; ; attempt++) {
      const res = await this.send("GET /v1/datasets", `${this.root}/v1/datasets`, headers, [200, 304]);
      const newEtag = headerValue(res.headers.etag);
      if (res.statusCode === 304) {
        await res.body.dump();
        return { notModified: true, etag: newEtag ?? etag };
      }
      let raw: unknown;
      try {
        raw = await res.body.json();
      } catch (err) {
        // A body cut off after the 200: the same request again, bounded like other transient failures.
        if (attempt >= this.retry.maxAttempts) throw new RetriesExhaustedError("GET /v1/datasets", attempt, err);
        await sleep(backoffDelay(this.retry, attempt), this.opts.signal);
        continue;
      }
      if (!Array.isArray(raw)) throw new Error("GET /v1/datasets: the listing is not a JSON array");
      return { notModified: false, etag: newEtag, datasets: raw.map((e) => normalizeEntry(e as Record<string, unknown>)) };
    }
  }

  /** Opens one CSV page (retrying until a 200 or a final error); the caller reads `body` to its end. */
  async openPage(entry: Pick<ListingEntry, "key" | "links">, params: { cursor?: string | null; limit: number }): Promise<PageResponse> {
    const qs = new URLSearchParams({ limit: String(params.limit) });
    if (params.cursor) qs.set("cursor", params.cursor);
    const path = entry.links.csv.startsWith("/") ? entry.links.csv : `/${entry.links.csv}`;
    const label = `GET ${entry.key} csv${params.cursor ? " (cursor)" : " (first page)"}`;
    const res = await this.send(label, `${this.root}${path}?${qs}`, { accept: "text/csv" }, [200]);
    return { body: res.body as unknown as Readable, request: label };
  }

  /** Opens one page of the dataset's deletion feed (`links.deletions`); the caller reads `body` to its end. */
  async openDeletions(entry: Pick<ListingEntry, "key" | "links">, params: { cursor?: string | null; limit: number }): Promise<PageResponse> {
    return this.openFeed(entry, "deletions", params);
  }

  /** One page of the dataset's rewrite feed (`links.rewrites`): its rows with their current text. */
  async openRewrites(entry: Pick<ListingEntry, "key" | "links">, params: { cursor?: string | null; limit: number }): Promise<PageResponse> {
    return this.openFeed(entry, "rewrites", params);
  }

  private async openFeed(entry: Pick<ListingEntry, "key" | "links">, feed: "deletions" | "rewrites", params: { cursor?: string | null; limit: number }): Promise<PageResponse> {
    const link = entry.links[feed];
    if (typeof link !== "string") throw new Error(`${entry.key}: the listing entry has no links.${feed}`);
    const qs = new URLSearchParams({ limit: String(params.limit) });
    if (params.cursor) qs.set("cursor", params.cursor);
    const path = link.startsWith("/") ? link : `/${link}`;
    const label = `GET ${entry.key} ${feed}${params.cursor ? " (cursor)" : " (first page)"}`;
    const res = await this.send(label, `${this.root}${path}?${qs}`, { accept: "text/csv" }, [200]);
    return { body: res.body as unknown as Readable, request: label };
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private async send(label: string, url: string, extra: Record<string, string>, ok: number[]): Promise<Dispatcher.ResponseData> {
    const headers = { ...extra, authorization: `Bearer ${this.opts.apiKey}`, "user-agent": this.opts.userAgent ?? "dataset-sync" };
    let failures = 0;
    let retryAfterWaitedMs = 0;
    for (;;) {
      let failure: { status?: number; errorCode?: string; retryAfter?: string | null };
      let finalError: Error;
      try {
        const res = await request(url, { method: "GET", headers, dispatcher: this.dispatcher });
        if (ok.includes(res.statusCode)) return res;
        const problem = await readProblem(res);
        failure = { status: res.statusCode, errorCode: problem.errorCode, retryAfter: headerValue(res.headers["retry-after"]) };
        finalError = new ApiError(label, problem);
      } catch (err) {
        if (this.opts.signal?.aborted) throw err;
        // A failure before any response (refused, reset, timeout): a transient network failure.
        failure = {};
        finalError = err as Error;
      }
      failures++;
      const decision = decideRetry(this.retry, { failures, retryAfterWaitedMs }, failure);
      if (!decision.retry) {
        if (finalError instanceof ApiError && (failure.status === undefined || failure.status < 500) && failure.status !== 429) throw finalError;
        if (finalError instanceof ApiError && failure.errorCode === "DATASET_NOT_EXPORTABLE") throw finalError;
        throw new RetriesExhaustedError(label, failures, finalError);
      }
      if (decision.kind === "retry-after") retryAfterWaitedMs += decision.delayMs;
      this.opts.onRetry?.({ request: label, status: failure.status, errorCode: failure.errorCode, kind: decision.kind, delayMs: decision.delayMs, failures });
      await sleep(decision.delayMs, this.opts.signal);
    }
  }
}

async function readProblem(res: Dispatcher.ResponseData): Promise<Problem> {
  let text = "";
  try {
    text = await res.body.text();
  } catch {
    // The body of an error may itself be cut off; the status still tells what happened.
  }
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    return {
      status: res.statusCode,
      errorCode: typeof body.errorCode === "string" ? body.errorCode : undefined,
      title: typeof body.title === "string" ? body.title : undefined,
      detail: typeof body.detail === "string" ? body.detail : undefined,
      traceId: typeof body.traceId === "string" ? body.traceId : undefined,
    };
  } catch {
    return { status: res.statusCode };
  }
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error("aborted"));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
