import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { FallbackEvent, SharedStoreStatus } from "../src/contracts";
import { createRateLimiter, limitsConfigSchema, rateLimiterOptionsFromConfig, type RateLimiterOptions } from "../src/limits";
import { createMemoryStore, createSharedStore, SharedStoreUnavailableError, type SharedStore } from "../src/store";
import { appErrorOf } from "./support/app-error";

const LIMITS: RateLimiterOptions = { concurrency: 5, perWindow: 600, windowSeconds: 60, leaseSeconds: 30 };

function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}


/** A store that plays Redis: shared by "replicas", and can be taken down and brought back. */
function switchableStore(clock: { now(): number }) {
  const inner = createMemoryStore({ clock });
  const events = new EventEmitter();
  let down = false;
  const guard = async <T>(op: () => Promise<T>) => {
    if (down) throw new SharedStoreUnavailableError("switched off");
    return op();
  };
  const store: SharedStore = {
    backend: "redis",
    status: (): SharedStoreStatus => ({ backend: "redis", healthy: !down }),
    onStatusChange(listener) {
      events.on("status", listener);
      return () => events.off("status", listener);
    },
    ready: async () => !down,
    admit: (r) => guard(() => inner.admit(r)),
    renewLease: (k, id, ms) => guard(() => inner.renewLease(k, id, ms)),
    releaseLease: (k, id) => guard(() => inner.releaseLease(k, id)),
    get: (k) => guard(() => inner.get(k)),
    set: (k, v, ms) => guard(() => inner.set(k, v, ms)),
    close: () => inner.close(),
  };
  const setDown = (value: boolean) => {
    down = value;
    events.emit("status", store.status(), value ? "test switched it off" : "test switched it on");
  };
  return { store, setDown };
}

describe("rate limiter (in-process store, manual clock)", () => {
  it("admits 5 requests in flight per organization and answers the 6th with a concurrency 429", async () => {
    const clock = manualClock();
    const limiter = createRateLimiter(createMemoryStore({ clock }), { ...LIMITS, clock });
    const org = randomUUID();
    const held = await Promise.all(Array.from({ length: 5 }, () => limiter.admit(org)));
    const err = await appErrorOf(limiter.admit(org));
    expect(err.status).toBe(429);
    expect(err.errorCode).toBe("RATE_LIMITED");
    expect(err.omitTraceId).toBe(true);
    expect(err.headers).toEqual({ "RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "1" });
    expect(err.retryAfter).toBe(1);
    // Another organization is not affected.
    const other = await limiter.admit(randomUUID());
    other.release();
    held[0]!.release();
    const next = await limiter.admit(org);
    next.release();
    held.forEach((a) => a.release());
    await limiter.close();
  });

  it("release() is idempotent: releasing one admission twice frees exactly one slot", async () => {
    const limiter = createRateLimiter(createMemoryStore(), { ...LIMITS, concurrency: 2 });
    const org = randomUUID();
    const a = await limiter.admit(org);
    const b = await limiter.admit(org);
    a.release();
    a.release();
    await new Promise((r) => setImmediate(r));
    const c = await limiter.admit(org);
    expect((await appErrorOf(limiter.admit(org))).headers?.["RateLimit-Limit"]).toBe("2");
    b.release();
    c.release();
    await limiter.close();
  });

  it("counts the window per organization across all replicas and keys, with a Retry-After until the oldest request leaves", async () => {
    const clock = manualClock();
    const shared = createMemoryStore({ clock });
    const replicaA = createRateLimiter(shared, { ...LIMITS, perWindow: 4, windowSeconds: 60, clock });
    const replicaB = createRateLimiter(shared, { ...LIMITS, perWindow: 4, windowSeconds: 60, clock });
    const org = randomUUID();
    (await replicaA.admit(org)).release();
    clock.advance(20_000);
    for (const limiter of [replicaB, replicaA, replicaB]) (await limiter.admit(org)).release();
    const err = await appErrorOf(replicaA.admit(org));
    expect(err.status).toBe(429);
    expect(err.headers).toEqual({ "RateLimit-Limit": "4", "RateLimit-Remaining": "0", "RateLimit-Reset": "40" });
    expect(err.retryAfter).toBe(40);
    // Rejections consume nothing: after 40 s exactly one place (the first request's) is free again.
    for (let i = 0; i < 3; i++) await appErrorOf(replicaB.admit(org));
    clock.advance(40_000);
    (await replicaB.admit(org)).release();
    expect((await appErrorOf(replicaA.admit(org))).headers?.["RateLimit-Limit"]).toBe("4");
    await replicaA.close();
    await replicaB.close();
  });

  it("gives back the slots of a replica that died without releasing them once their lease expires", async () => {
    const clock = manualClock();
    const shared = createMemoryStore({ clock });
    const survivor = createRateLimiter(shared, { ...LIMITS, concurrency: 2, leaseSeconds: 30, clock });
    const org = randomUUID();
    // A dead replica's leases: granted, never renewed, never released.
    for (let i = 0; i < 2; i++) {
      await shared.admit({ leasesKey: `exportsvc:rl:{${org}}:leases`, windowKey: `exportsvc:rl:{${org}}:window`, id: randomUUID(), maxLeases: 2, leaseMs: 30_000, maxInWindow: 600, windowMs: 60_000 });
    }
    expect((await appErrorOf(survivor.admit(org))).headers?.["RateLimit-Limit"]).toBe("2");
    clock.advance(29_999);
    expect((await appErrorOf(survivor.admit(org))).headers?.["RateLimit-Limit"]).toBe("2");
    clock.advance(1);
    const admitted = await survivor.admit(org);
    admitted.release();
    await survivor.close();
  });
});

describe("rate limiter lease renewal (fake timers)", () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_700_000_000_000 }));
  afterEach(() => jest.useRealTimers());

  it("renews a held slot every third of the lease so a long request keeps it, and stops renewing on release", async () => {
    const clock = { now: () => Date.now() };
    const store = createMemoryStore({ clock });
    const limiter = createRateLimiter(store, { ...LIMITS, concurrency: 1, leaseSeconds: 3, clock });
    const org = randomUUID();
    const longRequest = await limiter.admit(org);
    await jest.advanceTimersByTimeAsync(10_000);
    expect((await appErrorOf(limiter.admit(org))).headers?.["RateLimit-Limit"]).toBe("1");
    longRequest.release();
    await jest.advanceTimersByTimeAsync(0);
    const next = await limiter.admit(org);
    next.release();
    await limiter.close();
    await store.close();
  });
});

describe("rate limiter while the shared store is down", () => {
  it("falls back to per-replica limits, reports it through status and onFallback, and returns to shared limits", async () => {
    const clock = manualClock();
    const { store, setDown } = switchableStore(clock);
    const limiter = createRateLimiter(store, { ...LIMITS, concurrency: 2, clock });
    const events: FallbackEvent[] = [];
    limiter.onFallback((e) => events.push(e));
    const org = randomUUID();
    expect(limiter.status().mode).toBe("shared");

    const sharedHeld = await limiter.admit(org);
    setDown(true);
    expect(limiter.status()).toEqual({ mode: "local", store: { backend: "redis", healthy: false } });
    expect(events).toEqual([{ active: true, reason: "test switched it off" }]);

    // Exports keep flowing, and this replica still enforces the cap on its own.
    const local = [await limiter.admit(org), await limiter.admit(org)];
    expect((await appErrorOf(limiter.admit(org))).headers?.["RateLimit-Limit"]).toBe("2");
    sharedHeld.release(); // cannot reach the store: its lease will expire there by itself

    setDown(false);
    expect(limiter.status().mode).toBe("shared");
    expect(events).toEqual([
      { active: true, reason: "test switched it off" },
      { active: false, reason: "test switched it on" },
    ]);
    // Local admissions release into the local store; the shared lease expires after its lease time.
    local.forEach((a) => a.release());
    const again = await limiter.admit(org);
    expect((await appErrorOf(limiter.admit(org))).headers?.["RateLimit-Limit"]).toBe("2");
    clock.advance(LIMITS.leaseSeconds * 1000);
    const afterExpiry = await limiter.admit(org);
    again.release();
    afterExpiry.release();
    await limiter.close();
  });

  it("keeps admitting through a real Redis client pointed at a closed port, in per-replica mode", async () => {
    const store = createSharedStore({ redisUrl: "redis://127.0.0.1:1", connectTimeoutMs: 200 });
    const limiter = createRateLimiter(store, { ...LIMITS, concurrency: 1 });
    try {
      const events: FallbackEvent[] = [];
      limiter.onFallback((e) => events.push(e));
      expect(events).toEqual([{ active: true, reason: "shared store not available" }]);
      const org = randomUUID();
      const held = await limiter.admit(org);
      expect(limiter.status()).toEqual({ mode: "local", store: { backend: "redis", healthy: false } });
      expect((await appErrorOf(limiter.admit(org))).headers?.["RateLimit-Limit"]).toBe("1");
      held.release();
      await new Promise((r) => setImmediate(r));
      (await limiter.admit(org)).release();
    } finally {
      await limiter.close();
      await store.close();
    }
  });
});

describe("limits configuration", () => {
  it("defaults to the contract's values (docs/contract.md §11)", () => {
    expect(rateLimiterOptionsFromConfig(limitsConfigSchema.parse({}))).toEqual({ concurrency: 5, perWindow: 600, windowSeconds: 60, leaseSeconds: 30 });
  });

  it("reads overrides and refuses nonsense, naming the variable", () => {
    expect(rateLimiterOptionsFromConfig(limitsConfigSchema.parse({ RATE_LIMIT_PER_WINDOW: "20", RATE_LIMIT_LEASE_SECONDS: "6" }))).toMatchObject({ perWindow: 20, leaseSeconds: 6 });
    const result = limitsConfigSchema.safeParse({ RATE_LIMIT_CONCURRENCY: "0" });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(["RATE_LIMIT_CONCURRENCY"]);
  });
});
