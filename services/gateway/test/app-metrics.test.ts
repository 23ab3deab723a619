import { request } from "undici";
import { Errors } from "@exportsvc/common";
import { GatewayMetrics } from "../src/metrics";
import { auth, csvBytes, eventually, startHarness, writeChunk, type Harness } from "./support/harness";
import { countRejections } from "../src/server";

const metrics = new GatewayMetrics({ defaultMetrics: false });
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ metrics });
  h.exportBehaviours.set("late-failure", async (_req, call) => {
    await writeChunk(call, csvBytes(100 * 1024));
    throw Errors.databaseUnavailable();
  });
});
afterAll(() => h.close());

const sample = async (name: string, labels: Record<string, string>) => {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l));
  return value?.value ?? 0;
};

describe("metrics of the HTTP layer", () => {
  it("counts requests by route pattern (never the raw path) and problem responses by errorCode", async () => {
    await (await fetch(`${h.url}/v1/datasets/some_key/csv?limit=x`, { headers: auth })).text();
    await (await fetch(`${h.url}/no/such/path`)).text();
    // Requests are observed when their response closes, a moment after the client has the body.
    for (let i = 0; i < 100 && (await sample("http_requests_total", { route: "unmatched" })) === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await sample("http_requests_total", { route: "/v1/datasets/:datasetKey/csv", method: "GET", status: "400" })).toBe(1);
    expect(await sample("http_requests_total", { route: "unmatched", status: "404" })).toBe(1);
    expect(await sample("http_problem_responses_total", { status: "400", error_code: "INVALID_PARAMETER" })).toBe(1);
    expect(await sample("http_problem_responses_total", { status: "404", error_code: "NOT_FOUND" })).toBe(1);
    const text = await metrics.registry.metrics();
    expect(text).not.toContain("some_key");
  });

  it("counts a stream aborted after the 200 as an upstream error", async () => {
    const res = await request(`${h.url}/v1/datasets/late-failure/csv`, { headers: auth });
    await expect(res.body.arrayBuffer()).rejects.toThrow();
    await eventually(() => h.rateLimiter.inFlight === 0);
    expect(await sample("export_stream_aborts_total", { reason: "upstream_error" })).toBe(1);
    expect(await sample("export_stream_aborts_total", { reason: "client_disconnect" })).toBe(0);
  });
});

describe("countRejections", () => {
  it("counts 429s by the limit reached, told apart by RateLimit-Limit", async () => {
    const own = new GatewayMetrics({ defaultMetrics: false });
    let limit = 5;
    const limiter = countRejections(
      { admit: async () => { throw Errors.rateLimited({ limit, retryAfter: 1, reset: 1, detail: "over" }); } },
      own,
      5,
    );
    await expect(limiter.admit("org")).rejects.toMatchObject({ status: 429 });
    limit = 600;
    await expect(limiter.admit("org")).rejects.toMatchObject({ status: 429 });
    await expect(limiter.admit("org")).rejects.toMatchObject({ status: 429 });
    const values = (await own.rateLimitRejections.get()).values;
    expect(values.find((v) => v.labels.limit === "concurrency")?.value).toBe(1);
    expect(values.find((v) => v.labels.limit === "window")?.value).toBe(2);
  });
});
