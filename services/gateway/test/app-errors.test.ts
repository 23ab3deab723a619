import { AppError, Errors } from "@exportsvc/common";
import { auth, startHarness, type Harness } from "./support/harness";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  h.exportBehaviours.set("boom", async () => {
    throw new Error("relation export_secret_table does not exist at 10.0.0.7");
  });
  h.exportBehaviours.set("stale", async () => {
    throw Errors.datasetNotExportable("The dataset is out of date; republish the form.");
  });
  h.exportBehaviours.set("cursor", async () => {
    throw Errors.invalidCursor("The cursor was issued for another dataset.");
  });
});
afterAll(() => h.close());
beforeEach(() => {
  h.rateLimiter.reject = undefined;
  h.authenticator.failure = () => Errors.unauthorized();
});

async function problem(path: string, init: RequestInit = {}) {
  const res = await fetch(`${h.url}${path}`, init);
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  return { res, body: (await res.json()) as Record<string, any> };
}

describe("problem+json responses", () => {
  it("400 names every unparsable parameter at once, before the dataset is looked at", async () => {
    const before = h.exportRequests.length;
    const { res, body } = await problem(
      "/v1/datasets/nonexistent/csv?limit=ten&modifiedSince=2024-05-01+12:30:00.1+00&after=nope&afterRowIndex=x&from=a&to=b&bogus=1",
      { headers: auth },
    );
    expect(res.status).toBe(400);
    expect(body).toMatchObject({ type: "about:blank", title: "Invalid parameter", status: 400, errorCode: "INVALID_PARAMETER", instance: "/v1/datasets/nonexistent/csv" });
    expect(Object.keys(body.errors).sort()).toEqual(["after", "afterRowIndex", "from", "limit", "modifiedSince", "to"]);
    expect(body.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(typeof body.detail).toBe("string");
    expect(h.exportRequests.length).toBe(before);
  });

  it("401 has no detail, and is answered before any parameter is parsed", async () => {
    const { res, body } = await problem("/v1/datasets/x/csv?limit=ten", { headers: { authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
    expect(body).toMatchObject({ title: "Unauthorized", status: 401, errorCode: "UNAUTHORIZED" });
    expect(body).not.toHaveProperty("detail");
    expect(body).not.toHaveProperty("errors");
  });

  it("404 DATASET_NOT_FOUND from the export service vs plain 404 NOT_FOUND for an unknown route", async () => {
    const dataset = await problem("/v1/datasets/renamed/csv", { headers: auth });
    expect(dataset.res.status).toBe(404);
    expect(dataset.body).toMatchObject({ errorCode: "DATASET_NOT_FOUND", title: "Dataset not found" });

    const route = await problem("/v1/v1/datasets/renamed/csv", { headers: auth });
    expect(route.res.status).toBe(404);
    expect(route.body).toMatchObject({ errorCode: "NOT_FOUND", title: "Not Found", instance: "/v1/v1/datasets/renamed/csv" });
    expect(route.body.traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it("404 ORGANIZATION_NOT_CONFIGURED from the authenticator", async () => {
    h.authenticator.failure = () => Errors.organizationNotConfigured();
    const { res, body } = await problem("/v1/datasets", { headers: { authorization: "Bearer ak_other" } });
    expect(res.status).toBe(404);
    expect(body.errorCode).toBe("ORGANIZATION_NOT_CONFIGURED");
  });

  it("405 with Allow on a known route and another method", async () => {
    const { res, body } = await problem("/v1/datasets", { method: "POST", headers: auth });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    expect(body).toMatchObject({ errorCode: "METHOD_NOT_ALLOWED", status: 405 });
    const csv = await problem("/v1/datasets/x/csv", { method: "DELETE", headers: auth });
    expect(csv.res.status).toBe(405);
    const open = await problem("/health", { method: "PUT" });
    expect(open.res.status).toBe(405);
  });

  it("OPTIONS on a known route answers 204 with Allow", async () => {
    const res = await fetch(`${h.url}/v1/datasets`, { method: "OPTIONS" });
    expect(res.status).toBe(204);
    expect(res.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
  });

  it("500 INTERNAL_ERROR reveals nothing of the failure", async () => {
    const { res, body } = await problem("/v1/datasets/boom/csv", { headers: auth });
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ errorCode: "INTERNAL_ERROR", title: "Internal Server Error" });
    expect(JSON.stringify(body)).not.toMatch(/export_secret_table|10\.0\.0\.7|stack/);
  });

  it("a non-AppError thrown inside the gateway is a 500 too, and is logged", async () => {
    h.authenticator.failure = () => {
      throw new TypeError("cannot read properties of undefined (reading 'secret_hash')");
    };
    const { res, body } = await problem("/v1/datasets", { headers: { authorization: "Bearer ak_x" } });
    expect(res.status).toBe(500);
    expect(body.errorCode).toBe("INTERNAL_ERROR");
    expect(JSON.stringify(body)).not.toContain("secret_hash");
    expect(h.logs.join("")).toContain("unhandled error");
  });

  it("503 DATASET_NOT_EXPORTABLE without Retry-After; 503 AUTH_UNAVAILABLE with it", async () => {
    const stale = await problem("/v1/datasets/stale/csv", { headers: auth });
    expect(stale.res.status).toBe(503);
    expect(stale.body.errorCode).toBe("DATASET_NOT_EXPORTABLE");
    expect(stale.res.headers.get("retry-after")).toBeNull();

    h.authenticator.failure = () => Errors.authUnavailable(7);
    const authDown = await problem("/v1/datasets", { headers: { authorization: "Bearer ak_x" } });
    expect(authDown.res.status).toBe(503);
    expect(authDown.body.errorCode).toBe("AUTH_UNAVAILABLE");
    expect(authDown.res.headers.get("retry-after")).toBe("7");
  });

  it("400 INVALID_CURSOR from the export service keeps its title and code", async () => {
    const { res, body } = await problem("/v1/datasets/cursor/csv?cursor=", { headers: auth });
    expect(res.status).toBe(400);
    expect(body).toMatchObject({ errorCode: "INVALID_CURSOR", title: "Invalid cursor" });
    expect(h.exportRequests.at(-1)?.cursor).toBe("");
  });

  it("429 carries Retry-After and RateLimit-* headers and no traceId", async () => {
    h.rateLimiter.reject = Errors.rateLimited({ limit: 5, retryAfter: 1, reset: 1, detail: "5 requests in flight" });
    const { res, body } = await problem("/v1/datasets", { headers: auth });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.headers.get("ratelimit-limit")).toBe("5");
    expect(res.headers.get("ratelimit-remaining")).toBe("0");
    expect(res.headers.get("ratelimit-reset")).toBe("1");
    expect(body.errorCode).toBe("RATE_LIMITED");
    expect(body).not.toHaveProperty("traceId");
  });

  it("uses the caller's traceparent as the traceId", async () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const { body } = await problem("/nope", { headers: { traceparent } });
    expect(body.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it("successful data responses carry no rate-limit headers", async () => {
    const res = await fetch(`${h.url}/v1/datasets`, { headers: auth });
    expect(res.status).toBe(200);
    expect([...res.headers.keys()].filter((k) => k.startsWith("ratelimit"))).toEqual([]);
  });
});

describe("gRPC transport failures", () => {
  it("an export service that does not answer is a 503 DATABASE_UNAVAILABLE", async () => {
    const down = await startHarness({ exportAddress: "127.0.0.1:1", catalogAddress: "127.0.0.1:1" });
    try {
      const csv = await fetch(`${down.url}/v1/datasets/x/csv`, { headers: auth });
      expect(csv.status).toBe(503);
      expect(((await csv.json()) as AppError).errorCode).toBe("DATABASE_UNAVAILABLE");
      const listing = await fetch(`${down.url}/v1/datasets`, { headers: auth });
      expect(listing.status).toBe(503);
      expect(((await listing.json()) as AppError).errorCode).toBe("DATABASE_UNAVAILABLE");
      expect(down.rateLimiter.inFlight).toBe(0);
    } finally {
      await down.close();
    }
  });
});
