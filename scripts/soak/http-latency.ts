import { subscribe, unsubscribe } from "node:diagnostics_channel";

/**
 * Client-side latency of every HTTP request this process makes through undici (the sync client's
 * engine, and fetch), read from undici's diagnostics channels: no wrapper around the client under
 * test. A request is classified by its path into an endpoint; for each it records the time to the
 * response head (for a CSV page: its time to first byte, since the gateway commits the 200 only
 * with the first bytes) and to the end of the body, and counts statuses ("error" when no response
 * came: refused, reset, cut).
 */
export type Endpoint = "listing" | "page" | "deletions" | "other";

export interface Observation {
  endpoint: Endpoint;
  status: string;
  headMs: number;
  totalMs: number;
}

export function endpointOf(path: string): Endpoint {
  const p = path.split("?")[0];
  if (/\/v1\/datasets\/?$/.test(p)) return "listing";
  if (p.endsWith("/csv")) return "page";
  if (p.endsWith("/deletions")) return "deletions";
  return "other";
}

interface Pending {
  endpoint: Endpoint;
  start: number;
  headMs?: number;
  status?: number;
}

type RequestLike = { path?: string };

export class HttpLatencyRecorder {
  private readonly pending = new WeakMap<object, Pending>();
  private window: Observation[] = [];
  readonly all: Observation[] = [];
  private readonly handlers: Record<string, (message: unknown) => void>;

  constructor() {
    this.handlers = {
      "undici:request:create": (m) => {
        const { request } = m as { request: RequestLike };
        this.pending.set(request, { endpoint: endpointOf(request.path ?? ""), start: performance.now() });
      },
      "undici:request:headers": (m) => {
        const { request, response } = m as { request: object; response: { statusCode: number } };
        const p = this.pending.get(request);
        if (!p) return;
        p.headMs = performance.now() - p.start;
        p.status = response.statusCode;
      },
      "undici:request:trailers": (m) => this.finish((m as { request: object }).request, false),
      "undici:request:error": (m) => this.finish((m as { request: object }).request, true),
    };
    for (const [name, fn] of Object.entries(this.handlers)) subscribe(name, fn);
  }

  private finish(request: object, failed: boolean): void {
    const p = this.pending.get(request);
    if (!p) return;
    this.pending.delete(request);
    const totalMs = performance.now() - p.start;
    // A body cut after the head still counts under its status; no head at all is an "error".
    const o: Observation = { endpoint: p.endpoint, status: p.status === undefined ? "error" : String(p.status), headMs: p.headMs ?? totalMs, totalMs };
    if (failed && p.status === undefined) o.headMs = totalMs;
    this.window.push(o);
    this.all.push(o);
  }

  /** The observations since the last call. */
  takeWindow(): Observation[] {
    const w = this.window;
    this.window = [];
    return w;
  }

  close(): void {
    for (const [name, fn] of Object.entries(this.handlers)) unsubscribe(name, fn);
  }
}

export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const s = values.slice().sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

export interface EndpointSummary {
  requests: number;
  statuses: Record<string, number>;
  /** Listing: whole response; page/deletions: time to the response head (first byte). */
  p50: number | null;
  p95: number | null;
  p99: number | null;
  /** Whole response, every endpoint. */
  totalP99: number | null;
  /** p99 of the timed figure by status (a listing's 200s, which build a listing, against its 304s). */
  p99ByStatus: Record<string, number | null>;
}

/** Per endpoint: counts by status and latency percentiles (ms) of the successful responses (2xx/304). */
export function summarize(observations: Observation[]): Partial<Record<Endpoint, EndpointSummary>> {
  const out: Partial<Record<Endpoint, EndpointSummary>> = {};
  const groups = new Map<Endpoint, Observation[]>();
  for (const o of observations) {
    const g = groups.get(o.endpoint) ?? [];
    g.push(o);
    groups.set(o.endpoint, g);
  }
  for (const [endpoint, obs] of groups) {
    const statuses: Record<string, number> = {};
    for (const o of obs) statuses[o.status] = (statuses[o.status] ?? 0) + 1;
    const ok = obs.filter((o) => o.status === "304" || o.status.startsWith("2"));
    const timed = ok.map((o) => (endpoint === "listing" ? o.totalMs : o.headMs));
    const totals = ok.map((o) => o.totalMs);
    const p99ByStatus: Record<string, number | null> = {};
    for (const status of new Set(ok.map((o) => o.status))) p99ByStatus[status] = percentile(ok.filter((o) => o.status === status).map((o) => (endpoint === "listing" ? o.totalMs : o.headMs)), 99);
    out[endpoint] = { requests: obs.length, statuses, p50: percentile(timed, 50), p95: percentile(timed, 95), p99: percentile(timed, 99), totalP99: percentile(totals, 99), p99ByStatus };
  }
  return out;
}

/** Responses ≥ 500 (a 503 with Retry-After counts: the target is none at all without faults). */
export const serverErrors = (observations: Observation[]): number => observations.filter((o) => /^5\d\d$/.test(o.status)).length;
