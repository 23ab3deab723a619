import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { createMemoryStore, createSharedStore, type AdmitRequest, type SharedStore } from "../src/store";

/**
 * One suite, two backends: the in-process store with a manual clock, and Redis (REDIS_URL). Without
 * REDIS_URL the second run uses the in-process store too, and its title says so.
 */
interface Harness {
  store: SharedStore;
  /** Prefix of every key a test writes (the Redis harness moves time for these keys only). */
  prefix: string;
  /** Lets `ms` pass for the store. */
  pass(ms: number): Promise<void>;
  close(): Promise<void>;
}

function memoryHarness(): Harness {
  let now = 1_700_000_000_000;
  const store = createMemoryStore({ clock: { now: () => now } });
  return {
    store,
    prefix: "test:",
    pass: async (ms) => {
      now += ms;
    },
    close: () => store.close(),
  };
}

/**
 * Redis takes its time from its own clock (TIME), which a test cannot set. Instead of sleeping (a
 * loaded machine stretches every step between sleeps, and a lease meant to be alive expires), the
 * harness moves this test's keys back in time: every score (an admission time or a lease expiry)
 * and every time to live is lowered by `ms`, which is what `ms` passing would have done to them.
 */
async function redisHarness(url: string): Promise<Harness> {
  const store = createSharedStore({ redisUrl: url });
  if (!(await store.ready(5000))) throw new Error(`Redis at ${url} did not answer`);
  const admin = createClient({ url });
  await admin.connect();
  const prefix = `test:${randomUUID()}:`;
  return {
    store,
    prefix,
    pass: async (ms) => {
      for await (const keys of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 100 })) {
        for (const key of keys) {
          if ((await admin.type(key)) === "zset") {
            const members = await admin.zRangeWithScores(key, 0, -1);
            if (members.length > 0) await admin.zAdd(key, members.map((m) => ({ value: m.value, score: m.score - ms })));
          }
          const ttl = await admin.pTTL(key);
          if (ttl > ms) await admin.pExpire(key, ttl - ms);
          else if (ttl >= 0) await admin.del(key);
        }
      }
    },
    close: async () => {
      for await (const keys of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 100 })) if (keys.length > 0) await admin.del(keys);
      await admin.quit();
      await store.close();
    },
  };
}

const redisUrl = process.env.REDIS_URL;
const backends: Array<[string, () => Promise<Harness>]> = [
  ["in-process store (manual clock)", async () => memoryHarness()],
  redisUrl
    ? [`Redis store at ${redisUrl}`, () => redisHarness(redisUrl)]
    : ["in-process store in place of Redis (REDIS_URL unset)", async () => memoryHarness()],
];

describe.each(backends)("shared store semantics: %s", (_name, makeHarness) => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  const request = (org: string, overrides: Partial<AdmitRequest> = {}): AdmitRequest => ({
    leasesKey: `${h.prefix}rl:{${org}}:leases`,
    windowKey: `${h.prefix}rl:{${org}}:window`,
    id: randomUUID(),
    maxLeases: 2,
    leaseMs: 1000,
    maxInWindow: 5,
    windowMs: 60_000,
    ...overrides,
  });

  /** Admits one request of `org` and releases its lease at once: only the window limits. */
  const admitReleasing = async (org: string, overrides: Partial<AdmitRequest>) => {
    const r = request(org, overrides);
    const result = await h.store.admit(r);
    if (result.admitted) await h.store.releaseLease(r.leasesKey, r.id);
    return result;
  };

  it("grants leases up to the cap, then names the concurrency limit without recording the request", async () => {
    const org = randomUUID();
    const first = request(org);
    await expect(h.store.admit(first)).resolves.toMatchObject({ admitted: true, leasesHeld: 1, inWindow: 1 });
    await expect(h.store.admit(request(org))).resolves.toMatchObject({ admitted: true, leasesHeld: 2, inWindow: 2 });
    const third = await h.store.admit(request(org));
    expect(third).toMatchObject({ admitted: false, limit: "concurrency" });
    if (!third.admitted) expect(third.retryAfterMs).toBeGreaterThan(0);
    // The rejected request took no place in the window: the next admitted one is the 3rd in it.
    await h.store.releaseLease(first.leasesKey, first.id);
    await expect(h.store.admit(request(org))).resolves.toMatchObject({ admitted: true, leasesHeld: 2, inWindow: 3 });
  });

  it("frees a slot on release, and releasing twice is harmless", async () => {
    const org = randomUUID();
    const a = request(org, { maxLeases: 1 });
    await h.store.admit(a);
    await expect(h.store.admit(request(org, { maxLeases: 1 }))).resolves.toMatchObject({ admitted: false, limit: "concurrency" });
    await h.store.releaseLease(a.leasesKey, a.id);
    await h.store.releaseLease(a.leasesKey, a.id);
    await expect(h.store.admit(request(org, { maxLeases: 1 }))).resolves.toMatchObject({ admitted: true, leasesHeld: 1, inWindow: 2 });
  });

  it("lets an unrenewed lease expire, keeps a renewed one, and never revives an expired one", async () => {
    const org = randomUUID();
    const renewed = request(org);
    const abandoned = request(org);
    await h.store.admit(renewed);
    await h.store.admit(abandoned);
    await h.pass(600);
    await expect(h.store.renewLease(renewed.leasesKey, renewed.id, 1000)).resolves.toBe(true);
    await h.pass(600);
    // abandoned is 1200 ms old with a 1000 ms lease: gone; renewed was extended to about 1600 ms.
    await expect(h.store.admit(request(org))).resolves.toMatchObject({ admitted: true, leasesHeld: 2 });
    await expect(h.store.admit(request(org))).resolves.toMatchObject({ admitted: false, limit: "concurrency" });
    await expect(h.store.renewLease(abandoned.leasesKey, abandoned.id, 1000)).resolves.toBe(false);
    await expect(h.store.renewLease(renewed.leasesKey, "never-granted", 1000)).resolves.toBe(false);
  });

  it("rejects beyond the window budget with the time until the oldest request leaves, and a rejection consumes nothing", async () => {
    const org = randomUUID();
    const windowMs = 1500;
    const admit = () => admitReleasing(org, { maxInWindow: 3, windowMs });
    expect((await admit()).admitted).toBe(true);
    await h.pass(500);
    expect((await admit()).admitted).toBe(true);
    expect((await admit()).admitted).toBe(true);
    for (let i = 0; i < 3; i++) {
      const rejected = await admit();
      expect(rejected).toMatchObject({ admitted: false, limit: "window" });
      if (!rejected.admitted) {
        expect(rejected.retryAfterMs).toBeGreaterThan(0);
        expect(rejected.retryAfterMs).toBeLessThanOrEqual(1000);
      }
    }
    // Sliding: once the first request is older than the window exactly one more fits.
    await h.pass(1100);
    await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 3 });
    await expect(admit()).resolves.toMatchObject({ admitted: false, limit: "window" });
  });

  it("slides a window of thousands of requests: those older than it leave, the rest still count", async () => {
    const org = randomUUID();
    const admit = () => admitReleasing(org, { maxLeases: 10, maxInWindow: 2500, windowMs: 10_000 });
    for (let i = 0; i < 1500; i++) expect((await admit()).admitted).toBe(true);
    await h.pass(4000);
    for (let i = 0; i < 999; i++) await admit();
    await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 2500 });
    await expect(admit()).resolves.toMatchObject({ admitted: false, limit: "window" });
    await h.pass(6500);
    await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 1001 });
  });

  it("reports the window before the concurrency cap when both are reached", async () => {
    const org = randomUUID();
    await h.store.admit(request(org, { maxLeases: 1, maxInWindow: 1 }));
    await expect(h.store.admit(request(org, { maxLeases: 1, maxInWindow: 1 }))).resolves.toMatchObject({ admitted: false, limit: "window" });
  });

  it("keeps organizations apart", async () => {
    const full = randomUUID();
    await h.store.admit(request(full, { maxLeases: 1 }));
    await expect(h.store.admit(request(full, { maxLeases: 1 }))).resolves.toMatchObject({ admitted: false });
    await expect(h.store.admit(request(randomUUID(), { maxLeases: 1 }))).resolves.toMatchObject({ admitted: true });
  });

  it("stores values with a time to live", async () => {
    const key = `${h.prefix}value:${randomUUID()}`;
    await expect(h.store.get(key)).resolves.toBeNull();
    await h.store.set(key, "verdict", 1000);
    await expect(h.store.get(key)).resolves.toBe("verdict");
    await h.pass(1100);
    await expect(h.store.get(key)).resolves.toBeNull();
  });

  it("is healthy and ready", async () => {
    await expect(h.store.ready(1000)).resolves.toBe(true);
    expect(h.store.status().healthy).toBe(true);
  });
});

describe("in-process store with a clock that steps back", () => {
  it("counts an admission timed before the newest as the newest: it leaves with it, never sooner", async () => {
    let now = 1_700_000_000_000;
    const store = createMemoryStore({ clock: { now: () => now } });
    const admit = () =>
      store.admit({ leasesKey: "l", windowKey: "w", id: randomUUID(), maxLeases: 10, leaseMs: 1000, maxInWindow: 10, windowMs: 1000 });
    try {
      await admit();
      now -= 300; // e.g. NTP stepping the clock back
      await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 2 });
      now += 1100; // 800 ms after the first: by its own clock time the second would have left already
      await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 3 });
      now += 200; // 1000 ms after the first: both leave
      await expect(admit()).resolves.toMatchObject({ admitted: true, inWindow: 2 });
    } finally {
      await store.close();
    }
  });
});

describe("Redis store with Redis unreachable", () => {
  it("reports itself unhealthy and fails fast instead of queueing", async () => {
    const store = createSharedStore({ redisUrl: "redis://127.0.0.1:1", connectTimeoutMs: 200 });
    try {
      await expect(store.ready(300)).resolves.toBe(false);
      expect(store.status()).toEqual({ backend: "redis", healthy: false });
      await expect(store.get("anything")).rejects.toMatchObject({ name: "SharedStoreUnavailableError" });
    } finally {
      await store.close();
    }
  });
});
