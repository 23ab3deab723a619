import type { SharedStoreStatus } from "../contracts";
import { systemClock, type AdmitRequest, type AdmitResult, type Clock, type SharedStore } from "./types";

type Entry =
  | { kind: "string"; value: string; expiresAt: number }
  | { kind: "zset"; members: Map<string, number>; expiresAt: number }
  | { kind: "window"; window: AdmissionWindow; expiresAt: number };

/**
 * A sliding window's admission times, oldest first: the Redis store's window zset, whose members are
 * only ever added (scored by the time) and dropped by score. Kept in order, so dropping the expired
 * ones costs what they are, not what the window holds (an organization allowed 100 000 requests a
 * window would otherwise scan them all on every request). A time earlier than the newest (the system
 * clock stepped back) is recorded as the newest: that request leaves the window a little late.
 */
class AdmissionWindow {
  private times: number[] = [];
  private head = 0;

  get size(): number {
    return this.times.length - this.head;
  }

  /** The oldest admission time (Infinity when empty). */
  get oldest(): number {
    return this.size > 0 ? this.times[this.head] : Infinity;
  }

  /** The newest admission time (-Infinity when empty). */
  get newest(): number {
    return this.size > 0 ? this.times[this.times.length - 1] : -Infinity;
  }

  add(time: number): void {
    this.times.push(Math.max(time, this.newest));
  }

  /** Drops the admissions at or before `max`, like ZREMRANGEBYSCORE key -inf max. */
  dropUpTo(max: number): void {
    while (this.head < this.times.length && this.times[this.head] <= max) this.head++;
    // Compacted once half of it is dropped: amortized O(1) per admission.
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
  }
}

export interface MemoryStoreOptions {
  clock?: Clock;
  /** How often expired keys are swept so abandoned ones do not accumulate (ms). */
  sweepIntervalMs?: number;
}

/**
 * The in-process store: the same operations and semantics as the Redis store (see scripts.ts), for a
 * single replica (`npm start` without REDIS_URL) and as the per-replica fallback while Redis is down.
 * Each operation runs synchronously, so it is atomic within the process.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): SharedStore {
  const clock = options.clock ?? systemClock;
  const entries = new Map<string, Entry>();
  const status: SharedStoreStatus = { backend: "memory", healthy: true };

  const live = (key: string, now: number): Entry | undefined => {
    const entry = entries.get(key);
    if (entry && entry.expiresAt <= now) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };

  const zset = (key: string, now: number): Map<string, number> | undefined => {
    const entry = live(key, now);
    return entry?.kind === "zset" ? entry.members : undefined;
  };

  const admissions = (key: string, now: number): AdmissionWindow | undefined => {
    const entry = live(key, now);
    return entry?.kind === "window" ? entry.window : undefined;
  };

  /** Removes members scored at or below `max`, like ZREMRANGEBYSCORE key -inf max. */
  const dropUpTo = (members: Map<string, number>, max: number) => {
    for (const [member, score] of members) if (score <= max) members.delete(member);
  };

  const minScore = (members: Map<string, number>): number => {
    let min = Infinity;
    for (const score of members.values()) if (score < min) min = score;
    return min;
  };

  const sweep = setInterval(() => {
    const now = clock.now();
    for (const [key, entry] of entries) if (entry.expiresAt <= now) entries.delete(key);
  }, options.sweepIntervalMs ?? 10_000);
  sweep.unref();

  const admit = (req: AdmitRequest): AdmitResult => {
    const now = clock.now();
    const window = admissions(req.windowKey, now) ?? new AdmissionWindow();
    window.dropUpTo(now - req.windowMs);
    if (window.size >= req.maxInWindow) {
      return { admitted: false, limit: "window", retryAfterMs: Math.max(1, window.oldest + req.windowMs - now) };
    }
    const leases = zset(req.leasesKey, now) ?? new Map<string, number>();
    dropUpTo(leases, now);
    if (leases.size >= req.maxLeases) {
      return { admitted: false, limit: "concurrency", retryAfterMs: Math.max(1, minScore(leases) - now) };
    }
    leases.set(req.id, now + req.leaseMs);
    entries.set(req.leasesKey, { kind: "zset", members: leases, expiresAt: now + req.leaseMs });
    window.add(now);
    entries.set(req.windowKey, { kind: "window", window, expiresAt: window.newest + req.windowMs });
    return { admitted: true, leasesHeld: leases.size, inWindow: window.size };
  };

  const renewLease = (leasesKey: string, id: string, leaseMs: number): boolean => {
    const now = clock.now();
    const entry = live(leasesKey, now);
    if (entry?.kind !== "zset") return false;
    const expiry = entry.members.get(id);
    if (expiry === undefined) return false;
    if (expiry <= now) {
      entry.members.delete(id);
      return false;
    }
    entry.members.set(id, now + leaseMs);
    entry.expiresAt = Math.max(entry.expiresAt, now + leaseMs);
    return true;
  };

  return {
    backend: "memory",
    status: () => ({ ...status }),
    onStatusChange: () => () => undefined,
    ready: async () => true,
    admit: async (req) => admit(req),
    renewLease: async (leasesKey, id, leaseMs) => renewLease(leasesKey, id, leaseMs),
    releaseLease: async (leasesKey, id) => {
      zset(leasesKey, clock.now())?.delete(id);
    },
    get: async (key) => {
      const entry = live(key, clock.now());
      return entry?.kind === "string" ? entry.value : null;
    },
    set: async (key, value, ttlMs) => {
      entries.set(key, { kind: "string", value, expiresAt: clock.now() + ttlMs });
    },
    close: async () => {
      clearInterval(sweep);
      entries.clear();
    },
  };
}
