import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import type { Pool } from "pg";
import { createPool } from "@exportsvc/db";
import { databaseProbe } from "../src/readiness";
import { testPool } from "../../../test/support/db";
import { startHarness, type Harness } from "./support/harness";

describe("open endpoints", () => {
  let h: Harness;
  let pool: Pool;
  beforeAll(async () => {
    pool = testPool();
    h = await startHarness({ probeDatabase: databaseProbe(pool, 2000) });
  });
  afterAll(async () => {
    await h.close();
    await pool.end();
  });

  it("GET /health answers without a key", async () => {
    const res = await fetch(`${h.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    expect(h.authenticator.calls).toBe(0);
  });

  it("GET /health/ready probes the real database", async () => {
    const res = await fetch(`${h.url}/health/ready`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ready", checks: { database: "ok" } });
  });

  it("GET /build shows the deployed build", async () => {
    const res = await fetch(`${h.url}/build`);
    expect(await res.json()).toEqual({ imageTag: "1.2.3", commit: "abc123", buildDate: "2026-11-22T00:00:00Z", version: "0.1.0" });
  });

  it("GET /swagger/v1/swagger.json describes the data endpoints only (listing, CSV, deletion and rewrite feeds)", async () => {
    const res = await fetch(`${h.url}/swagger/v1/swagger.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths).sort()).toEqual(["/v1/datasets", "/v1/datasets/{datasetKey}/csv", "/v1/datasets/{datasetKey}/deletions", "/v1/datasets/{datasetKey}/rewrites"]);
  });
});

describe("GET /health/ready with the database down", () => {
  it("is a 503 DATABASE_UNAVAILABLE with checks when nothing listens", async () => {
    const pool = createPool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres" });
    const h = await startHarness({ probeDatabase: databaseProbe(pool, 2000) });
    try {
      const res = await fetch(`${h.url}/health/ready`);
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      expect(res.headers.get("retry-after")).toBeNull();
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE", checks: { database: "unavailable" }, instance: "/health/ready" });
      expect(body.traceId).toMatch(/^[0-9a-f]{32}$/);
    } finally {
      await h.close();
      await pool.end();
    }
  });

  it("is a 503 when the database accepts connections but never answers (probe timeout)", async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as AddressInfo).port;
    const pool = createPool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    const h = await startHarness({ probeDatabase: databaseProbe(pool, 300) });
    try {
      const res = await fetch(`${h.url}/health/ready`);
      expect(res.status).toBe(503);
      expect(((await res.json()) as { errorCode: string }).errorCode).toBe("DATABASE_UNAVAILABLE");
    } finally {
      await h.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
      await pool.end().catch(() => undefined);
    }
  });
});
