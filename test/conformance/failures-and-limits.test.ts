/**
 * Conformance, black-box over HTTP: the 503 rows of the error and retry tables (failures injected
 * with a TCP proxy in front of PostgreSQL) and the rate-limit rows of the limits table.
 */
import { Client } from "pg";
import { startE2E, type E2E } from "../support/fixture";
import { testDatabaseUrl } from "../support/db";
import { startTcpProxy, viaProxy, type TcpProxy } from "../support/tcp-proxy";
import { problem } from "./helpers";

function target(url: string) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 5432) };
}

describe("conformance: database and key store failures", () => {
  let gatewayDb: TcpProxy;
  let servicesDb: TcpProxy;
  let e2e: E2E;

  beforeAll(async () => {
    const t = target(testDatabaseUrl());
    gatewayDb = await startTcpProxy(t.host, t.port);
    servicesDb = await startTcpProxy(t.host, t.port);
    e2e = await startE2E({
      serviceEnv: {
        gateway: { DATABASE_URL: viaProxy(testDatabaseUrl(), gatewayDb), KEY_STORE_TIMEOUT_MS: "1000" },
        catalog: { DATABASE_URL: viaProxy(testDatabaseUrl(), servicesDb) },
        export: { DATABASE_URL: viaProxy(testDatabaseUrl(), servicesDb) },
        schema: { DATABASE_URL: viaProxy(testDatabaseUrl(), servicesDb) },
      },
    });
  }, 120_000);
  afterAll(async () => {
    await e2e?.stop();
    await gatewayDb?.close();
    await servicesDb?.close();
  });

  it("key store unreachable: 503 AUTH_UNAVAILABLE with Retry-After; readiness 503; liveness 200", async () => {
    const fresh = await e2e.issueKey(e2e.organizationId);
    gatewayDb.cut();
    try {
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${fresh.secret}` } });
      const body = await problem(res, 503);
      expect(body).toMatchObject({ errorCode: "AUTH_UNAVAILABLE", title: "Authentication temporarily unavailable" });
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      const ready = await fetch(`${e2e.baseUrl}/health/ready`);
      expect((await problem(ready, 503)).errorCode).toBe("DATABASE_UNAVAILABLE");
      expect((await fetch(`${e2e.baseUrl}/health`)).status).toBe(200);
    } finally {
      gatewayDb.restore();
    }
    expect((await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${fresh.secret}` } })).status).toBe(200);
  });

  it("key store that does not answer (locked): 503 AUTH_UNAVAILABLE after the key-store timeout, not a hung request", async () => {
    const fresh = await e2e.issueKey(e2e.organizationId);
    const locker = new Client({ connectionString: testDatabaseUrl() });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE");
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${fresh.secret}` }, signal: AbortSignal.timeout(15_000) });
      const body = await problem(res, 503);
      expect(body.errorCode).toBe("AUTH_UNAVAILABLE");
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await locker.query("ROLLBACK");
      await locker.end();
    }
    expect((await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${fresh.secret}` } })).status).toBe(200);
  });

  it("a failed database operation: 503 DATABASE_UNAVAILABLE without Retry-After, on the listing and the CSV; nothing lost after", async () => {
    // Warm the key cache so that authentication does not need the database.
    expect((await e2e.get("/v1/datasets")).status).toBe(200);
    servicesDb.cut();
    try {
      for (const path of ["/v1/datasets", "/v1/datasets/resources_suppliers/csv"]) {
        const res = await e2e.get(path);
        const body = await problem(res, 503);
        expect(body).toMatchObject({ errorCode: "DATABASE_UNAVAILABLE", title: "Database unavailable" });
        expect(res.headers.get("retry-after")).toBeNull();
      }
    } finally {
      servicesDb.restore();
    }
    let status = 0;
    for (let i = 0; i < 40 && status !== 200; i++) {
      status = (await e2e.get("/v1/datasets/resources_suppliers/csv")).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 250));
    }
    expect(status).toBe(200);
  });
});

describe("conformance: rate limits", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E({ env: { RATE_LIMIT_PER_WINDOW: "12", RATE_LIMIT_CONCURRENCY: "5" } });
  }, 120_000);
  afterAll(() => e2e?.stop());

  it("over the per-window budget: 429 RATE_LIMITED with Retry-After, RateLimit-* (limit = the window budget), no traceId", async () => {
    const { secret } = await e2e.newOrganization();
    const call = () => fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${secret}` } });
    let limited: Response | undefined;
    for (let i = 0; i < 14 && !limited; i++) {
      const res = await call();
      if (res.status === 429) limited = res;
      else {
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      }
    }
    expect(limited).toBeDefined();
    const body = await problem(limited!, 429);
    expect(body.errorCode).toBe("RATE_LIMITED");
    expect(body.traceId).toBeUndefined();
    expect(limited!.headers.get("ratelimit-limit")).toBe("12");
    expect(limited!.headers.get("ratelimit-remaining")).toBe("0");
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Number(limited!.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(0);
  });

  it("limits count per organization across keys: another organization is unaffected", async () => {
    const a = await e2e.newOrganization();
    const second = await e2e.issueKey(a.organizationId);
    let last = 0;
    for (let i = 0; i < 13; i++) {
      const token = i % 2 === 0 ? a.secret : second.secret;
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${token}` } });
      last = res.status;
      await res.arrayBuffer();
    }
    expect(last).toBe(429);
    const b = await e2e.newOrganization();
    expect((await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${b.secret}` } })).status).toBe(200);
  });
});

describe("conformance: concurrency limit", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E({ env: { RATE_LIMIT_CONCURRENCY: "5" } });
  }, 120_000);
  afterAll(() => e2e?.stop());

  it("more than 5 requests in flight: 429 with RateLimit-Limit 5; a slot frees when a stream ends", async () => {
    const { organizationId, secret } = await e2e.newOrganization();
    // A page (5000 rows, ~20 MB) far larger than everything that can buffer it on the way (the
    // gRPC window, the gateway's and the kernel's socket buffers, the client's): an unread
    // response stays in flight, held open by backpressure, and keeps its slot. Uncompressed: gzipped,
    // the repeated letters would shrink to a size the buffers hold, and the streams would end.
    await e2e.pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description, last_modified)
       SELECT $1, gen_random_uuid(), 'Supplier ' || g, repeat('x', 4000), now() - (g || ' seconds')::interval FROM generate_series(1, 6000) g`,
      [organizationId],
    );
    const headers = { Authorization: `Bearer ${secret}` };
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const open = await Promise.all(
      controllers.map((c) => fetch(`${e2e.baseUrl}/v1/datasets/resources_suppliers/csv`, { headers: { ...headers, "Accept-Encoding": "identity" }, signal: c.signal })),
    );
    for (const res of open) expect(res.status).toBe(200);
    const sixth = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers });
    const body = await problem(sixth, 429);
    expect(body.errorCode).toBe("RATE_LIMITED");
    expect(sixth.headers.get("ratelimit-limit")).toBe("5");
    for (const c of controllers) c.abort();
    let status = 0;
    for (let i = 0; i < 40 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 250));
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers });
      status = res.status;
      await res.arrayBuffer();
    }
    expect(status).toBe(200);
  }, 60_000);
});
