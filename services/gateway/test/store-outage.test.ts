import { randomUUID } from "node:crypto";
import { createServer, connect, type Server, type Socket } from "node:net";
import { testRedis, type TestRedis } from "../../../test/limits/processes";
import type { FallbackEvent } from "../src/contracts";
import { createRateLimiter } from "../src/limits";
import { createSharedStore, type SharedStore } from "../src/store";

/**
 * Redis going away and coming back, seen through a TCP proxy in front of a real Redis (REDIS_URL, or
 * a throwaway redis-server) so that no other user of that Redis is disturbed:
 * - cut: connections dropped and refused (Redis down, a network partition);
 * - freeze: connections open but replies held back (Redis hung).
 */
let upstreamUrl: URL;
const redisOrigin = process.env.REDIS_URL ? "Redis at REDIS_URL" : "a throwaway redis-server (REDIS_URL unset)";

class ChaosProxy {
  private server?: Server;
  private sockets = new Set<Socket>();
  private frozen = false;
  private held: Array<() => void> = [];
  /** When set, every command is answered with this error reply instead of reaching Redis. */
  refusal?: string;
  port = 0;

  async start(port = 0): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(Number(upstreamUrl.port || 6379), upstreamUrl.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("error", () => undefined);
        s.on("close", () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.on("data", (chunk) => {
        // One command per chunk is all these tests send while refusing.
        if (this.refusal) client.write(`-${this.refusal}\r\n`);
        else upstream.write(chunk);
      });
      upstream.on("data", (chunk) => {
        if (this.frozen) this.held.push(() => client.write(chunk));
        else client.write(chunk);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
    const address = this.server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async cut(): Promise<void> {
    const server = this.server!;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    this.sockets.forEach((s) => s.destroy());
    await closed;
  }

  async restore(): Promise<void> {
    await this.start(this.port);
  }

  freeze(): void {
    this.frozen = true;
  }

  thaw(): void {
    this.frozen = false;
    this.held.splice(0).forEach((flush) => flush());
  }

  async stop(): Promise<void> {
    this.sockets.forEach((s) => s.destroy());
    if (this.server) await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

const waitFor = async (condition: () => boolean, what: string, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe(`shared store outage and recovery (proxy in front of ${redisOrigin})`, () => {
  let redis: TestRedis;
  let proxy: ChaosProxy;
  let store: SharedStore;

  beforeAll(async () => {
    redis = await testRedis();
    upstreamUrl = new URL(redis.url);
  });

  afterAll(async () => {
    await redis?.stop();
  });

  beforeEach(async () => {
    proxy = new ChaosProxy();
    await proxy.start();
    // Generous for a loaded CI machine: only the frozen case waits for it, and that wait is the point.
    store = createSharedStore({ redisUrl: proxy.url, commandTimeoutMs: 1000, connectTimeoutMs: 2000 });
    if (!(await store.ready(5000))) throw new Error("store did not connect through the proxy");
  });

  afterEach(async () => {
    await store.close();
    await proxy.stop();
  });

  it("switches the limiter to per-replica limits when Redis drops, keeps admitting, and returns to shared limits on reconnect", async () => {
    const limiter = createRateLimiter(store, { concurrency: 2, perWindow: 100, windowSeconds: 60, leaseSeconds: 30, keyPrefix: `outage-${randomUUID()}:` });
    const events: FallbackEvent[] = [];
    limiter.onFallback((e) => events.push(e));
    const org = randomUUID();
    expect(limiter.status().mode).toBe("shared");

    await proxy.cut();
    await waitFor(() => !store.status().healthy, "the store to notice the drop");
    expect(limiter.status()).toEqual({ mode: "local", store: { backend: "redis", healthy: false } });
    expect(events[0]).toMatchObject({ active: true });

    const local = [await limiter.admit(org), await limiter.admit(org)];
    await expect(limiter.admit(org)).rejects.toMatchObject({ status: 429, headers: { "RateLimit-Limit": "2" } });
    local.forEach((a) => a.release());

    await proxy.restore();
    await waitFor(() => store.status().healthy, "the store to reconnect");
    expect(limiter.status().mode).toBe("shared");
    expect(events.at(-1)).toMatchObject({ active: false });
    const shared = await limiter.admit(org);
    shared.release();
    await limiter.close();
  });

  it("falls back for a call Redis refuses for lack of memory, without declaring the connection down", async () => {
    const limiter = createRateLimiter(store, { concurrency: 1, perWindow: 100, windowSeconds: 60, leaseSeconds: 30, keyPrefix: `oom-${randomUUID()}:` });
    const org = randomUUID();
    proxy.refusal = "OOM command not allowed when used memory > 'maxmemory'.";
    await expect(store.get("anything")).rejects.toMatchObject({ name: "SharedStoreUnavailableError" });
    expect(store.status().healthy).toBe(true);
    const admitted = await limiter.admit(org);
    await expect(limiter.admit(org)).rejects.toMatchObject({ status: 429 });
    admitted.release();
    proxy.refusal = undefined;
    await expect(store.get("anything")).resolves.toBeNull();
    await limiter.close();
  });

  it("treats a Redis that stops answering as unavailable after the command timeout, fails fast meanwhile, and recovers once it answers", async () => {
    const key = `outage-${randomUUID()}`;
    await store.set(key, "before", 60_000);
    proxy.freeze();
    await expect(store.get(key)).rejects.toMatchObject({ name: "SharedStoreUnavailableError" });
    expect(store.status().healthy).toBe(false);
    // No second wait on a hung Redis: the next call fails at once.
    await expect(store.get(key)).rejects.toThrow(/not answering/);
    proxy.thaw();
    await waitFor(() => store.status().healthy, "the health probe to succeed");
    await expect(store.get(key)).resolves.toBe("before");
  });
});
