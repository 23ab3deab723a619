import { once } from "node:events";
import { createConnection } from "node:net";
import { request } from "undici";
import { buildIdentity, ConfigError, generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import type { Pool } from "pg";
import { start, type RunningGateway } from "../src/server";
import { httpLimitsFromConfig, loadGatewayConfig } from "../src/config";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { csvBytes, eventually, startFakeServices, writeChunk, type ExportBehaviour, type FakeServiceState } from "./support/harness";

const KEY_HASH_SECRET = "main-test-pepper-0123456789";

/** What the fake catalog and export services start with: no export behaviours, an empty listing. */
const emptyFakeState = (): FakeServiceState => ({
  exportRequests: [],
  listRequests: [],
  cancelledExports: 0,
  exportBehaviours: new Map(),
  catalogResponse: async () => ({ datasets: [], etag: '"e1"' }),
});

/** An export page that streams until the call is cancelled. */
const endlessExport: ExportBehaviour = async (_req, call) => {
  const chunk = csvBytes(32 * 1024);
  while (!call.cancelled) await writeChunk(call, chunk);
};

interface GatewayOverFakes {
  pool: Pool;
  organizationId: string;
  secret: string;
  services: { port: number; close(): Promise<void> };
  gateway: RunningGateway;
}

/**
 * The real gateway (start) on the run's database, with one API key of a fresh organization, in front
 * of fake catalog and export services that read `state`; `env` adds to its configuration.
 */
async function startGatewayOverFakes(state: FakeServiceState, env: Record<string, string>): Promise<GatewayOverFakes> {
  const pool = testPool();
  const organizationId = await createTestOrganization(pool);
  const key = generateApiKey();
  await pool.query("INSERT INTO api_keys (id, organization_id, secret_hash) VALUES ($1, $2, $3)", [key.id, organizationId, hashApiKeySecret(key.secret, KEY_HASH_SECRET)]);
  const services = await startFakeServices(state);
  const gateway = await start(
    loadGatewayConfig({
      DATABASE_URL: testDatabaseUrl(),
      KEY_HASH_SECRET,
      PORT: "0",
      HOST: "127.0.0.1",
      CATALOG_ADDRESS: `127.0.0.1:${services.port}`,
      EXPORT_ADDRESS: `127.0.0.1:${services.port}`,
      LOG_LEVEL: "silent",
      ...env,
    }),
  );
  return { pool, organizationId, secret: key.secret, services, gateway };
}

describe("loadGatewayConfig", () => {
  it("fails fast naming every missing variable", () => {
    let error: unknown;
    try {
      loadGatewayConfig({});
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain("DATABASE_URL");
    expect((error as Error).message).toContain("KEY_HASH_SECRET");
  });

  it("applies the documented defaults", () => {
    const config = loadGatewayConfig({ DATABASE_URL: "postgres://x@127.0.0.1/db", KEY_HASH_SECRET: "s" });
    expect(config).toMatchObject({
      PORT: 8080,
      HOST: "0.0.0.0",
      CATALOG_ADDRESS: "127.0.0.1:50052",
      EXPORT_ADDRESS: "127.0.0.1:50053",
      GZIP_LEVEL: 1,
      RATE_LIMIT_CONCURRENCY: 5,
      RATE_LIMIT_PER_WINDOW: 600,
    });
    expect(config.REDIS_URL).toBeUndefined();
    expect(Number.isNaN(Date.parse(buildIdentity(config).buildDate))).toBe(false);
  });

  it("reads the listener's connection cap and timeouts, and refuses values outside their ranges naming the variable", () => {
    const base = { DATABASE_URL: "postgres://x@127.0.0.1/db", KEY_HASH_SECRET: "s" };
    expect(httpLimitsFromConfig(loadGatewayConfig(base))).toEqual({ maxConnections: 10_000, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 65_000 });
    expect(httpLimitsFromConfig(loadGatewayConfig({ ...base, HTTP_MAX_CONNECTIONS: "500", HTTP_HEADERS_TIMEOUT_MS: "5000", HTTP_KEEP_ALIVE_TIMEOUT_MS: "30000" }))).toEqual({
      maxConnections: 500,
      headersTimeoutMs: 5_000,
      keepAliveTimeoutMs: 30_000,
    });
    expect(() => loadGatewayConfig({ ...base, HTTP_MAX_CONNECTIONS: "0" })).toThrow(/HTTP_MAX_CONNECTIONS/);
    expect(() => loadGatewayConfig({ ...base, HTTP_HEADERS_TIMEOUT_MS: "ten" })).toThrow(/HTTP_HEADERS_TIMEOUT_MS/);
    expect(() => loadGatewayConfig({ ...base, HTTP_KEEP_ALIVE_TIMEOUT_MS: "10" })).toThrow(/HTTP_KEEP_ALIVE_TIMEOUT_MS/);
  });

  it("rejects a BUILD_DATE that is not a date", () => {
    expect(() => loadGatewayConfig({ DATABASE_URL: "postgres://x@127.0.0.1/db", KEY_HASH_SECRET: "s", BUILD_DATE: "yesterday" })).toThrow(/BUILD_DATE/);
  });
});

describe("start(config): the gateway wired with the real authenticator, limiter and key store", () => {
  let pool: Pool;
  let gateway: RunningGateway;
  let services: { port: number; close(): Promise<void> };
  let secret: string;
  let organizationId: string;
  const state = emptyFakeState();

  beforeAll(async () => {
    state.exportBehaviours.set("endless", endlessExport);
    ({ pool, organizationId, secret, services, gateway } = await startGatewayOverFakes(state, { RATE_LIMIT_CONCURRENCY: "1", SHUTDOWN_GRACE_MS: "500" }));
  });

  afterAll(async () => {
    await gateway?.stop();
    await services?.close();
    await pool?.end();
  });

  it("serves the listing for a valid key, scoped to the key's organization", async () => {
    const res = await fetch(`${gateway.url}/v1/datasets`, { headers: { authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("etag")).toBe('"e1"');
    expect(state.listRequests.at(-1)?.organizationId).toBe(organizationId);
  });

  it("rejects an unknown key with 401", async () => {
    const res = await fetch(`${gateway.url}/v1/datasets`, { headers: { authorization: `Bearer ${generateApiKey().secret}` } });
    expect(res.status).toBe(401);
  });

  it("is ready against its database", async () => {
    const res = await fetch(`${gateway.url}/health/ready`);
    expect(res.status).toBe(200);
  });

  it("holds the concurrency slot for the whole stream and frees it when the client leaves", async () => {
    const headers = { authorization: `Bearer ${secret}` };
    const stream = await request(`${gateway.url}/v1/datasets/endless/csv`, { headers });
    expect(stream.statusCode).toBe(200);
    const second = await fetch(`${gateway.url}/v1/datasets`, { headers });
    expect(second.status).toBe(429);
    expect(second.headers.get("ratelimit-limit")).toBe("1");
    stream.body.destroy();
    await eventually(() => state.cancelledExports > 0);
    let status = 0;
    // The slot is released when the response closes, a moment after the client hangs up.
    for (let attempt = 0; attempt < 100 && status !== 200; attempt++) {
      status = (await fetch(`${gateway.url}/v1/datasets`, { headers })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  });
});

describe("stop(): graceful shutdown", () => {
  it("ends when the last stream in flight ends, though the client keeps its keep-alive connection open", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const state = emptyFakeState();
    state.exportBehaviours.set("finite", async (_req, call) => {
      await writeChunk(call, csvBytes(16 * 1024));
      await released;
      await writeChunk(call, csvBytes(16 * 1024));
    });
    // A grace far longer than the test: stop() must not wait for it.
    const { pool, secret, services, gateway } = await startGatewayOverFakes(state, { SHUTDOWN_GRACE_MS: "300000" });
    try {
      const responding = request(`${gateway.url}/v1/datasets/finite/csv`, { headers: { authorization: `Bearer ${secret}` } });
      await eventually(() => state.exportRequests.length > 0);
      let stopped = false;
      const stopping = gateway.stop().then(() => (stopped = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(stopped).toBe(false);
      release();
      const stream = await responding;
      expect(stream.statusCode).toBe(200);
      expect((await stream.body.text()).length).toBe(32 * 1024);
      // undici keeps the connection for its next request; the gateway closes it once idle.
      const outcome = await Promise.race([stopping.then(() => "stopped"), new Promise((r) => setTimeout(() => r("still waiting"), 30_000))]);
      expect(outcome).toBe("stopped");
    } finally {
      release();
      await gateway.stop();
      await services.close();
      await pool.end();
    }
  }, 60_000);

  it("does not wait for connections that never sent a byte, and answers a request half-sent when the stop began", async () => {
    const state = emptyFakeState();
    // A grace far longer than the test: stop() must not wait for it.
    const { pool, services, gateway } = await startGatewayOverFakes(state, { SHUTDOWN_GRACE_MS: "300000" });
    const { port, hostname } = new URL(gateway.url);
    const connect = async () => {
      const socket = createConnection(Number(port), hostname);
      await once(socket, "connect");
      const closed = once(socket, "close");
      return { socket, closed };
    };
    try {
      // A client's spare connections: open, silent (Node's closeIdleConnections() leaves these).
      const spare = await Promise.all([connect(), connect(), connect()]);
      // And a request whose head is half-sent when the stop begins: it is answered, not cut.
      const half = await connect();
      const answer: Buffer[] = [];
      half.socket.on("data", (chunk: Buffer) => answer.push(chunk));
      half.socket.write("GET /health HTTP/1.1\r\nHost: gateway\r\n");
      await eventually(() => half.socket.bytesWritten > 0);
      // Time for the gateway to read those bytes (a connection it has read nothing from counts as silent).
      await new Promise((r) => setTimeout(r, 250));
      let stopped = false;
      const stopping = gateway.stop().then(() => (stopped = true));
      await Promise.all(spare.map((c) => c.closed));
      expect(stopped).toBe(false);
      half.socket.write("\r\n");
      await half.closed;
      expect(Buffer.concat(answer).toString("latin1")).toMatch(/^HTTP\/1\.1 \d{3} /);
      // Well before the 300 s grace, and well within the test's own timeout.
      await stopping;
    } finally {
      await gateway.stop();
      await services.close();
      await pool.end();
    }
  }, 60_000);

  it("lets a stream in flight run for the grace period, then aborts it and refuses new connections", async () => {
    const state = emptyFakeState();
    state.exportBehaviours.set("endless", endlessExport);
    const { pool, secret, services, gateway } = await startGatewayOverFakes(state, { SHUTDOWN_GRACE_MS: "300" });
    try {
      const stream = await request(`${gateway.url}/v1/datasets/endless/csv`, { headers: { authorization: `Bearer ${secret}` } });
      expect(stream.statusCode).toBe(200);
      const reading = (async () => {
        for await (const _chunk of stream.body) void _chunk;
      })();
      await gateway.stop();
      await expect(reading).rejects.toThrow();
      await eventually(() => state.cancelledExports > 0);
      await expect(fetch(`${gateway.url}/health`)).rejects.toThrow();
    } finally {
      await gateway.stop();
      await services.close();
      await pool.end();
    }
  });
});

