/**
 * The listener and protocol edges an attacker or a careless client reaches (issue 12, items 3, 4
 * and 6; issue 14, item 3). docs/security.md lists these cases.
 */
import { connect, type Socket } from "node:net";
import { quoteInput } from "@exportsvc/common";
import { GatewayMetrics } from "../src/metrics";
import { auth, startHarness, type Harness } from "./support/harness";

type Metrics = GatewayMetrics;

const sample = async (metrics: Metrics, name: string, labels: Record<string, string> = {}) => {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l));
  return value?.value ?? 0;
};

/** Sends raw bytes and collects everything the server writes until it closes the connection. */
function exchange(url: string, raw: string | undefined, timeoutMs = 20_000): Promise<{ text: string; head: string; body: string }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () => {
      if (raw !== undefined) socket.write(raw);
    });
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of response within ${timeoutMs} ms; got: ${text.slice(0, 200)}`));
    }, timeoutMs);
    socket.on("data", (chunk) => (text += chunk.toString("latin1")));
    socket.on("close", () => {
      clearTimeout(timer);
      const at = text.indexOf("\r\n\r\n");
      resolve({ text, head: at < 0 ? text : text.slice(0, at), body: at < 0 ? "" : text.slice(at + 4) });
    });
    socket.on("error", () => undefined);
  });
}

/** Opens a connection that sends nothing; resolves once connected. */
function idleConnection(url: string): Promise<Socket> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
}

describe("connection cap (HTTP_MAX_CONNECTIONS)", () => {
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  let h: Harness;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    h = await startHarness({ metrics, http: { maxConnections: 3 } });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await h.close();
  });

  it("refuses connections beyond the cap, counts and logs them (once per interval), and serves others once connections close", async () => {
    for (let i = 0; i < 3; i++) sockets.push(await idleConnection(h.url));
    // The listener has accepted all three before a fourth is tried.
    for (let i = 0; i < 200 && (await sample(metrics, "http_open_connections")) < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await sample(metrics, "http_open_connections")).toBe(3);

    const refused = await exchange(h.url, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(refused.text).toBe("");
    const again = await exchange(h.url, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(again.text).toBe("");
    expect(await sample(metrics, "http_connections_refused_total", { reason: "max_connections" })).toBe(2);
    const warnings = h.logs.filter((line) => line.includes("connection cap reached"));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0])).toMatchObject({ maxConnections: 3, refused: 1 });

    // The idle ones still hold their places; once one closes, a new client is served.
    sockets.pop()!.destroy();
    let served: Awaited<ReturnType<typeof exchange>> | undefined;
    for (let i = 0; i < 100 && !served?.text; i++) {
      served = await exchange(h.url, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      if (!served.text) await new Promise((r) => setTimeout(r, 20));
    }
    expect(served!.head).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(served!.body)).toEqual({ status: "ok" });
  });
});

describe("requests that never reach the router", () => {
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ metrics, http: { headersTimeoutMs: 1_000 } });
  });
  afterAll(() => h.close());

  it("a header section not finished within the header timeout: 408 problem+json REQUEST_TIMEOUT, counted", async () => {
    const { head, body } = await exchange(h.url, "GET /v1/datasets HTTP/1.1\r\nHost: x\r\nX-Slow: a");
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
    expect(head).toMatch(/content-type: application\/problem\+json/i);
    const problem = JSON.parse(body);
    expect(problem).toMatchObject({ status: 408, errorCode: "REQUEST_TIMEOUT", title: "Request Timeout" });
    expect(problem.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(problem.instance).not.toBe("/");
    expect(await sample(metrics, "http_requests_total", { route: "unparsed", status: "408" })).toBe(1);
    expect(await sample(metrics, "http_problem_responses_total", { status: "408", error_code: "REQUEST_TIMEOUT" })).toBe(1);
  }, 30_000);

  it("a connection that sends nothing is closed after the header timeout (it cannot hold a descriptor)", async () => {
    const { head } = await exchange(h.url, undefined);
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
  }, 30_000);

  it.each([
    ["a malformed header line", "GET /v1/datasets/abc/csv?limit=5 HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n", 400, "BAD_REQUEST", "/v1/datasets/abc/csv"],
    ["a header section too large", `GET /v1/datasets HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE", "/v1/datasets"],
  ])("%s: problem+json with the request's path as instance, counted", async (_name, raw, status, errorCode, instance) => {
    const before = await sample(metrics, "http_requests_total", { route: "unparsed", method: "GET", status: String(status) });
    const { head, body } = await exchange(h.url, raw);
    expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(JSON.parse(body)).toMatchObject({ status, errorCode, instance });
    expect(await sample(metrics, "http_requests_total", { route: "unparsed", method: "GET", status: String(status) })).toBe(before + 1);
    expect(await sample(metrics, "http_problem_responses_total", { status: String(status), error_code: errorCode })).toBeGreaterThanOrEqual(1);
    expect(h.logs.some((line) => line.includes("request refused by the HTTP parser") && line.includes(errorCode))).toBe(true);
  });

  it("an HTTP/1.1 request without Host: 400 problem+json", async () => {
    const { head, body } = await exchange(h.url, "GET /v1/datasets HTTP/1.1\r\nConnection: close\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(body)).toMatchObject({ status: 400, errorCode: "BAD_REQUEST", instance: "/v1/datasets" });
  });
});

describe("protocol details", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it("401 carries the RFC 6750 challenge: bare without a credential, invalid_token with a refused one", async () => {
    const missing = await fetch(`${h.url}/v1/datasets`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="dataset-export"');
    const wrong = await fetch(`${h.url}/v1/datasets`, { headers: { authorization: "Bearer ak_wrong" } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toBe('Bearer realm="dataset-export", error="invalid_token"');
    expect(await wrong.json()).not.toHaveProperty("detail");
  });

  it.each(["/V1/datasets/x/CSV", "/v1/datasets/x/CSV", "/V1/datasets", "/v1/Datasets", "/HEALTH", "/Build"])("routes match case-sensitively: %s is 404 NOT_FOUND", async (path) => {
    const before = h.exportRequests.length;
    const res = await fetch(`${h.url}${path}`, { headers: auth });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ errorCode: "NOT_FOUND", title: "Not Found" });
    expect(h.exportRequests.length).toBe(before);
  });

  it("a detail quotes caller input escaped: no markup, no control characters", async () => {
    const key = await fetch(`${h.url}/v1/datasets/%3Cb%3Ex%00/csv`, { headers: auth });
    expect(key.status).toBe(404);
    const keyBody = (await key.json()) as Record<string, any>;
    expect(keyBody.errorCode).toBe("DATASET_NOT_FOUND");
    expect(keyBody.detail).toContain("'%3Cb%3Ex%00'");
    expect(keyBody.detail).not.toMatch(/[<>\u0000]/);

    const name = await fetch(`${h.url}/v1/datasets/x/csv?%3Cscript%3E%00=1`, { headers: auth });
    expect(name.status).toBe(400);
    const nameBody = (await name.json()) as Record<string, any>;
    expect(nameBody.detail).not.toMatch(/[<>\u0000]/);
    expect(nameBody.detail).toContain("%3Cscript%3E");
  });

  it("quoteInput percent-encodes everything but [A-Za-z0-9_.~-], lone surrogates as U+FFFD, and cuts long input", () => {
    expect(quoteInput("resources_lots")).toBe("'resources_lots'");
    expect(quoteInput("a'b\"<c>\n")).toBe("'a%27b%22%3Cc%3E%0A'");
    expect(quoteInput("é\uD800")).toBe("'%C3%A9%EF%BF%BD'");
    expect(quoteInput("x".repeat(500))).toBe(`'${"x".repeat(80)}…'`);
  });

  it("the request's trace id travels to the export service as traceparent", async () => {
    const res = await fetch(`${h.url}/v1/datasets/unknown_key/csv`, { headers: { ...auth, traceparent: `00-${"ab".repeat(16)}-${"cd".repeat(8)}-01` } });
    const body = (await res.json()) as Record<string, any>;
    expect(body.traceId).toBe("ab".repeat(16));
    expect(h.exportTraceparents.at(-1)).toMatch(new RegExp(`^00-${"ab".repeat(16)}-[0-9a-f]{16}-0[01]$`));
  });
});

describe("input PostgreSQL cannot take is refused before any service is called", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it.each([
    ["NUL", "/v1/datasets/x%00/csv"],
    ["NUL alone", "/v1/datasets/%00/csv"],
    ["invalid UTF-8", "/v1/datasets/x%C3%28/csv"],
    ["a lone byte above 0x7f", "/v1/datasets/%FF/csv"],
    ["a lone surrogate (CESU-8)", "/v1/datasets/%ED%A0%80/csv"],
    ["an overlong encoding", "/v1/datasets/%C0%AF/csv"],
    ["a malformed escape", "/v1/datasets/x%G1/csv"],
  ])("dataset key with %s: 404 DATASET_NOT_FOUND", async (_name, path) => {
    const before = h.exportRequests.length;
    const res = await fetch(`${h.url}${path}`, { headers: auth });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ errorCode: "DATASET_NOT_FOUND", status: 404 });
    expect(h.exportRequests.length).toBe(before);
  });

  it.each([
    ["cursor", "cursor=abc%00def"],
    ["cursor", "cursor=%C3%28"],
    ["cursor", "cursor=%ED%A0%80"],
    ["after", "after=%00"],
    ["limit", "limit=5%00"],
    ["modifiedSince", "modifiedSince=2024-05-01%2012:00:00%FF&after=0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b"],
    ["bogus", "bogus=%00"],
    ["from", "from=%E0%80%80"],
  ])("%s with invalid text (%s): 400 INVALID_PARAMETER naming it", async (name, query) => {
    const before = h.exportRequests.length;
    const res = await fetch(`${h.url}/v1/datasets/resources_lots/csv?${query}`, { headers: auth });
    expect(res.status).toBe(400);
    const body = (await res.json()) as Record<string, any>;
    expect(body).toMatchObject({ errorCode: "INVALID_PARAMETER" });
    expect(Object.keys(body.errors)).toContain(name);
    expect(h.exportRequests.length).toBe(before);
  });

  it("valid non-ASCII text passes through to the export service unchanged", async () => {
    const before = h.exportRequests.length;
    const res = await fetch(`${h.url}/v1/datasets/caf%C3%A9/csv?cursor=%F0%9F%98%80`, { headers: auth });
    expect(res.status).toBe(404);
    expect(h.exportRequests.length).toBe(before + 1);
    expect(h.exportRequests.at(-1)).toMatchObject({ datasetKey: "café", cursor: "😀" });
  });
});
