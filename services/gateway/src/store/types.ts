import type { SharedStoreStatus } from "../contracts";

/** Milliseconds since the epoch; injectable so tests control time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** One request asking for a concurrency lease and a place in the sliding window, atomically. */
export interface AdmitRequest {
  /** Sorted set of lease ids scored by their expiry (ms). */
  leasesKey: string;
  /** Sorted set of admitted request ids scored by their admission time (ms). */
  windowKey: string;
  /** Unique id of this request; becomes the lease id and the window entry. */
  id: string;
  maxLeases: number;
  leaseMs: number;
  maxInWindow: number;
  windowMs: number;
}

export type AdmitResult =
  | { admitted: true; leasesHeld: number; inWindow: number }
  /**
   * `window`: the window is full; retryAfterMs is when its oldest entry leaves.
   * `concurrency`: all leases are taken; retryAfterMs is when the earliest lease would expire if
   * never renewed (an upper bound, since a release frees a slot sooner).
   */
  | { admitted: false; limit: "window" | "concurrency"; retryAfterMs: number };

/**
 * State shared by the gateway replicas. Every operation that reads and writes is atomic (a Lua
 * script in Redis, a synchronous block in the in-process store), so replicas never race.
 */
export interface SharedStore {
  readonly backend: SharedStoreStatus["backend"];
  status(): SharedStoreStatus;
  /** Called on every change of status(); returns the unsubscribe function. */
  onStatusChange(listener: (status: SharedStoreStatus, reason?: string) => void): () => void;
  /** Resolves true once the backend answers (at once for the in-process store), false after timeoutMs. */
  ready(timeoutMs: number): Promise<boolean>;

  admit(request: AdmitRequest): Promise<AdmitResult>;
  /** Extends a lease that is still held; false when it is gone (released or expired). */
  renewLease(leasesKey: string, id: string, leaseMs: number): Promise<boolean>;
  releaseLease(leasesKey: string, id: string): Promise<void>;

  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs: number): Promise<void>;

  close(): Promise<void>;
}

/** The backend could not be reached in time; callers fall back to in-process state. */
export class SharedStoreUnavailableError extends Error {
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`shared store unavailable: ${reason}`, options);
    this.name = "SharedStoreUnavailableError";
  }
}

export const isSharedStoreUnavailable = (err: unknown): err is SharedStoreUnavailableError =>
  err instanceof SharedStoreUnavailableError;
