/**
 * Conformance, black-box over HTTP: the listing, authentication outcomes, the error and retry
 * tables' statuses and headers, and the open endpoints.
 */
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import { startE2E, type E2E } from "../support/fixture";
import { problem } from "./helpers";

describe("conformance: listing, authentication, errors, open endpoints", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  const withToken = (token: string | undefined, path = "/v1/datasets") =>
    fetch(`${e2e.baseUrl}${path}`, { headers: token === undefined ? {} : { Authorization: token } });

  describe("GET /v1/datasets", () => {
    it("200 JSON array with ETag and Cache-Control: private, no-cache; null fields omitted", async () => {
      const res = await e2e.get("/v1/datasets");
      expect(res.status).toBe(200);
      expect(res.headers.get("etag")).toMatch(/^(W\/)?".+"$/);
      expect(res.headers.get("cache-control")).toBe("private, no-cache");
      const text = await res.text();
      expect(text).not.toContain("null");
      expect(Array.isArray(JSON.parse(text))).toBe(true);
    });

    it("If-None-Match with the current ETag: 304 with the ETag and no body", async () => {
      const etag = (await e2e.get("/v1/datasets")).headers.get("etag")!;
      const res = await e2e.get("/v1/datasets", { "If-None-Match": etag });
      expect(res.status).toBe(304);
      expect(res.headers.get("etag")).toBe(etag);
      expect(await res.text()).toBe("");
    });

    it("a change to a dataset's own records moves its changeToken and the ETag, and no other token", async () => {
      const before = await e2e.get("/v1/datasets");
      const etag = before.headers.get("etag");
      const tokens = new Map(((await before.json()) as Array<{ key: string; changeToken: string }>).map((d) => [d.key, d.changeToken]));
      await e2e.pool.query("INSERT INTO chemicals (organization_id, id, name, last_modified) VALUES ($1, $2, 'Conformance chemical', clock_timestamp())", [e2e.organizationId, randomUUID()]);
      const after = await e2e.get("/v1/datasets", { "If-None-Match": etag! });
      expect(after.status).toBe(200);
      expect(after.headers.get("etag")).not.toBe(etag);
      const now = new Map(((await after.json()) as Array<{ key: string; changeToken: string }>).map((d) => [d.key, d.changeToken]));
      for (const [key, token] of tokens) {
        if (key === "resources_chemicals") expect(now.get(key)).not.toBe(token);
        else expect(now.get(key)).toBe(token);
      }
    });

    it("successful responses carry no rate-limit headers", async () => {
      const res = await e2e.get("/v1/datasets");
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-limit")).toBeNull();
      expect(res.headers.get("retry-after")).toBeNull();
    });
  });

  describe("authentication (401 has no detail; never transient)", () => {
    it.each([
      ["missing", undefined],
      ["not bearer", "Basic dXNlcjpwYXNz"],
      ["not ak_", "Bearer sk_0123456789012345678901234567890123456789"],
      ["malformed ak_", "Bearer ak_short"],
      ["unknown secret", "Bearer ak_0123456789012345678901234567890123456789"],
    ])("%s: 401 UNAUTHORIZED", async (_name, header) => {
      const body = await problem(await withToken(header), 401);
      expect(body.errorCode).toBe("UNAUTHORIZED");
      expect(body.detail).toBeUndefined();
      expect(body.traceId).toMatch(/^[0-9a-f]{32}$/);
    });

    it("the key id instead of the secret: 401 like a wrong key", async () => {
      const key = await e2e.issueKey(e2e.organizationId);
      expect((await problem(await withToken(`Bearer ${key.id}`), 401)).errorCode).toBe("UNAUTHORIZED");
      expect((await withToken(`Bearer ${key.secret}`)).status).toBe(200);
    });

    it("revoked and expired keys: 401", async () => {
      const revoked = await e2e.issueKey(e2e.organizationId, { revoked: true });
      const expired = await e2e.issueKey(e2e.organizationId, { expiresAt: new Date(Date.now() - 1000) });
      expect((await withToken(`Bearer ${revoked.secret}`)).status).toBe(401);
      expect((await withToken(`Bearer ${expired.secret}`)).status).toBe(401);
    });

    it("a valid key not tied to a known organization: 401", async () => {
      const orphan = await e2e.issueKey(randomUUID());
      expect((await problem(await withToken(`Bearer ${orphan.secret}`), 401)).errorCode).toBe("UNAUTHORIZED");
    });

    it("organization recognised but not enabled for export: 404 Organization not configured on the listing and the CSV", async () => {
      const { secret } = await e2e.newOrganization({ enabled: false });
      const listing = await problem(await withToken(`Bearer ${secret}`), 404);
      expect(listing).toMatchObject({ errorCode: "ORGANIZATION_NOT_CONFIGURED", title: "Organization not configured" });
      const csv = await problem(await withToken(`Bearer ${secret}`, "/v1/datasets/deviations/csv"), 404);
      expect(csv.errorCode).toBe("ORGANIZATION_NOT_CONFIGURED");
    });
  });

  describe("tenant isolation", () => {
    it("another organization sees its own (empty) datasets, never the demo's rows", async () => {
      const { secret } = await e2e.newOrganization();
      const res = await withToken(`Bearer ${secret}`, "/v1/datasets/resources_suppliers/csv");
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text.trim().split("\n")).toHaveLength(1);
    });
  });

  describe("errors", () => {
    it("every error is problem+json with errorCode, traceId and instance", async () => {
      const body = await problem(await e2e.get("/v1/datasets/no_such/csv"), 404);
      expect(body.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(body.instance).toBe("/v1/datasets/no_such/csv");
      expect(typeof body.detail).toBe("string");
    });

    it.each([
      ["a header line without a colon", "GET /v1/datasets HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n", 400, "BAD_REQUEST"],
      ["a header section that is too large", `GET /v1/datasets HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE"],
    ])("a request the HTTP parser rejects (%s): problem+json with errorCode", async (_name, raw, status, errorCode) => {
      const { port } = new URL(e2e.baseUrl);
      const response = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), "127.0.0.1", () => socket.write(raw));
        let data = "";
        socket.on("data", (chunk) => (data += chunk.toString()));
        socket.on("end", () => resolve(data));
        socket.on("error", reject);
      });
      const [head, body] = response.split("\r\n\r\n");
      expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(head).toMatch(/content-type: application\/problem\+json/i);
      expect(JSON.parse(body)).toMatchObject({ status, errorCode });
    });

    it("a known route with a wrong method: 405 METHOD_NOT_ALLOWED with Allow", async () => {
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`, { method: "POST", headers: { Authorization: `Bearer ${e2e.apiKey}` } });
      const body = await problem(res, 405);
      expect(body.errorCode).toBe("METHOD_NOT_ALLOWED");
      expect(res.headers.get("allow")).toMatch(/GET/);
    });

    it("a dataset that cannot serve an export: 503 DATASET_NOT_EXPORTABLE without Retry-After, winning over a wrong parameter", async () => {
      const { organizationId, secret } = await e2e.newOrganization();
      // Let the registry be created, then mark one dataset as out of date on the server side.
      expect((await withToken(`Bearer ${secret}`)).status).toBe(200);
      await e2e.pool.query("UPDATE dataset_registry SET state = 'failed', error = 'test' WHERE organization_id = $1 AND key = 'resources_recipes'", [organizationId]);
      const res = await withToken(`Bearer ${secret}`, "/v1/datasets/resources_recipes/csv?limit=9999");
      const body = await problem(res, 503);
      expect(body).toMatchObject({ errorCode: "DATASET_NOT_EXPORTABLE", title: "Dataset cannot be exported" });
      expect(res.headers.get("retry-after")).toBeNull();
      // Other datasets of the organization continue.
      expect((await withToken(`Bearer ${secret}`, "/v1/datasets/resources_lots/csv")).status).toBe(200);
    });
  });

  describe("open endpoints (no key)", () => {
    it("GET /health: 200 {status: ok}", async () => {
      const res = await fetch(`${e2e.baseUrl}/health`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: "ok" });
    });

    it("GET /health/ready: 200 with the database check", async () => {
      const res = await fetch(`${e2e.baseUrl}/health/ready`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: "ready", checks: { database: "ok" } });
    });

    it("GET /build: image tag, commit, build date, version", async () => {
      const res = await fetch(`${e2e.baseUrl}/build`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      for (const k of ["imageTag", "commit", "buildDate", "version"]) expect(typeof body[k]).toBe("string");
      expect(Number.isNaN(Date.parse(body.buildDate))).toBe(false);
    });

    it("GET /swagger/v1/swagger.json: OpenAPI 3 of the data endpoints only (listing, CSV, deletion and rewrite feeds; no open endpoints)", async () => {
      const res = await fetch(`${e2e.baseUrl}/swagger/v1/swagger.json`);
      expect(res.status).toBe(200);
      const doc = (await res.json()) as any;
      expect(doc.openapi).toMatch(/^3\./);
      expect(Object.keys(doc.paths).sort()).toEqual(["/v1/datasets", "/v1/datasets/{datasetKey}/csv", "/v1/datasets/{datasetKey}/deletions", "/v1/datasets/{datasetKey}/rewrites"]);
    });
  });
});
