import { randomUUID } from "node:crypto";
import { startReplica, stopReplica, testRedis, type Replica, type TestRedis } from "./processes";

/**
 * Three gateway-like processes share one Redis through the real rate limiter. Limits small enough to
 * keep the test quick: 5 in flight, 20 per 60 s window, 3 s leases (renewed every second).
 */
const LIMITS = { RATE_LIMIT_CONCURRENCY: "5", RATE_LIMIT_PER_WINDOW: "20", RATE_LIMIT_WINDOW_SECONDS: "60", RATE_LIMIT_LEASE_SECONDS: "3" };
const redisOrigin = process.env.REDIS_URL ? `Redis at REDIS_URL` : "a throwaway redis-server (REDIS_URL unset)";

interface Answer {
  status: number;
  held?: number;
  limit?: string;
  retryAfter?: number;
}

async function hold(replica: Replica, org: string, ms: number): Promise<Answer> {
  const res = await fetch(`${replica.baseUrl}/hold?org=${org}&ms=${ms}`);
  await res.text();
  return {
    status: res.status,
    held: res.headers.has("x-held") ? Number(res.headers.get("x-held")) : undefined,
    limit: res.headers.get("ratelimit-limit") ?? undefined,
    retryAfter: res.headers.has("retry-after") ? Number(res.headers.get("retry-after")) : undefined,
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe(`rate limits shared by three processes through ${redisOrigin}`, () => {
  let redis: TestRedis;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await testRedis();
    const env = { ...LIMITS, REDIS_URL: redis.url, KEY_PREFIX: `limits-test-${randomUUID()}:` };
    replicas = await Promise.all([startReplica(env), startReplica(env), startReplica(env)]);
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r)));
    await redis?.stop();
  });

  it("never holds more than 5 requests of one organization in flight across the three", async () => {
    const org = randomUUID();
    const answers = await Promise.all(Array.from({ length: 15 }, (_, i) => hold(replicas[i % 3]!, org, 1500)));
    const admitted = answers.filter((a) => a.status === 200);
    const rejected = answers.filter((a) => a.status === 429);
    expect(admitted).toHaveLength(5);
    expect(rejected).toHaveLength(10);
    expect(Math.max(...admitted.map((a) => a.held!))).toBe(5);
    for (const r of rejected) {
      expect(r.limit).toBe("5");
      expect(r.retryAfter).toBeGreaterThanOrEqual(1);
    }
    // Once they finish, the slots are free again on every process.
    const after = await Promise.all(replicas.map((r) => hold(r, org, 0)));
    expect(after.map((a) => a.status)).toEqual([200, 200, 200]);
  });

  it("never admits more than the window limit across the three, and a 429 consumes nothing", async () => {
    const org = randomUUID();
    const answers: Answer[] = [];
    // Two at a time, rotating over the three processes: even if a release were still on its way to
    // Redis, the concurrency cap (5) could not interfere with the window count.
    for (let round = 0; round < 15; round++) {
      const pair = [replicas[round % 3]!, replicas[(round + 1) % 3]!];
      answers.push(...(await Promise.all(pair.map((r) => hold(r, org, 0)))));
    }
    expect(answers.filter((a) => a.status === 200)).toHaveLength(20);
    const rejected = answers.filter((a) => a.status === 429);
    expect(rejected).toHaveLength(10);
    for (const r of rejected) {
      expect(r.limit).toBe("20");
      expect(r.retryAfter).toBeGreaterThanOrEqual(1);
      expect(r.retryAfter).toBeLessThanOrEqual(60);
    }
  });

  it("keeps a long request's slot while its process lives, and gives it back after the lease once the process is SIGKILLed", async () => {
    const org = randomUUID();
    const [doomed, survivor, witness] = replicas as [Replica, Replica, Replica];
    const aborts = Array.from({ length: 5 }, () => new AbortController());
    // Five long requests on one process; fetch resolves once each is admitted (headers are flushed).
    const responses = await Promise.all(aborts.map((a) => fetch(`${doomed.baseUrl}/hold?org=${org}&ms=600000`, { signal: a.signal })));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);

    // Longer than a lease: the holder renews, so the slots stay taken.
    await sleep(4000);
    expect(await hold(witness, org, 0)).toMatchObject({ status: 429, limit: "5" });

    await stopReplica(doomed, "SIGKILL");
    aborts.forEach((a) => a.abort());
    expect(await hold(survivor, org, 0)).toMatchObject({ status: 429, limit: "5" });

    let answer: Answer = { status: 0 };
    for (let attempt = 0; attempt < 60 && answer.status !== 200; attempt++) {
      await sleep(250);
      answer = await hold(survivor, org, 0);
    }
    expect(answer.status).toBe(200);
  });
});
