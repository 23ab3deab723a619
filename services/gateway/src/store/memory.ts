import type { SharedStoreStatus } from "../contracts";
import { systemClock, type AdmitRequest, type AdmitResult, type Clock, type SharedStore } from "./types";

type Entry =
  | { kind: "string"; value: string; expiresAt: number }
  | { kind: "zset"; members: Map<string, number>; expiresAt: number };

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
    const window = zset(req.windowKey, now) ?? new Map<string, number>();
    dropUpTo(window, now - req.windowMs);
    if (window.size >= req.maxInWindow) {
      return { admitted: false, limit: "window", retryAfterMs: Math.max(1, minScore(window) + req.windowMs - now) };
    }
    const leases = zset(req.leasesKey, now) ?? new Map<string, number>();
    dropUpTo(leases, now);
    if (leases.size >= req.maxLeases) {
      return { admitted: false, limit: "concurrency", retryAfterMs: Math.max(1, minScore(leases) - now) };
    }
    leases.set(req.id, now + req.leaseMs);
    entries.set(req.leasesKey, { kind: "zset", members: leases, expiresAt: now + req.leaseMs });
    window.set(req.id, now);
    entries.set(req.windowKey, { kind: "zset", members: window, expiresAt: now + req.windowMs });
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
