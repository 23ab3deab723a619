/**
 * The cheap 304 decided in the gateway (routes/datasets.ts; docs/catalog.md, "A cheap 304"): once
 * the catalog reported an ETag settled at a listing version, a matching If-None-Match is answered
 * 304 without a catalog call while the listing state says that version still holds; anything else
 * goes to the catalog.
 */
import { request } from "undici";
import { Errors } from "@exportsvc/common";
import { GatewayMetrics } from "../src/metrics";
import { ListingCache, type OrganizationListingState } from "@exportsvc/datasets";
import { auth, eventually, ORGANIZATION_ID, startHarness, type Harness } from "./support/harness";
import { EARLY_WORK_PER_ORGANIZATION } from "../src/http/access-control";

const ETAG = '"v-settled"';
const metrics = new GatewayMetrics({ defaultMetrics: false });
let h: Harness;
let state: OrganizationListingState | Error;
const stateCalls: string[] = [];
/** When set, the listing-state statement is answered only once it resolves. */
let stateGate: Promise<void> | undefined;

beforeAll(async () => {
  h = await startHarness({
    metrics,
    settledListings: {
      cache: new ListingCache(0),
      state: async (organizationId) => {
        stateCalls.push(organizationId);
        if (stateGate) await stateGate;
        if (state instanceof Error) throw state;
        return state;
      },
    },
  });
  h.catalogResponse = async () => ({ datasets: [{ key: "resources_suppliers" }], etag: ETAG, settledVersion: "41" });
});
afterAll(() => h.close());

const held: OrganizationListingState = { syncNeeded: false, version: "41", pending: false };

async function listing(ifNoneMatch?: string) {
  const res = await request(`${h.url}/v1/datasets`, { headers: { ...auth, ...(ifNoneMatch ? { "if-none-match": ifNoneMatch } : {}) } });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

it("learns the settled version from the catalog, then answers a matching If-None-Match itself", async () => {
  state = held;
  expect((await listing()).status).toBe(200);
  const catalogCalls = h.listRequests.length;
  for (const ifNoneMatch of [ETAG, `W/${ETAG}`, `"older", ${ETAG}`]) {
    const res = await listing(ifNoneMatch);
    expect(res.status).toBe(304);
    expect(res.headers.etag).toBe(ETAG);
    expect(res.headers["cache-control"]).toBe("private, no-cache");
    expect(res.headers.vary).toBe("Accept-Encoding");
    expect(res.body).toBe("");
  }
  expect(h.listRequests.length).toBe(catalogCalls);
  expect(stateCalls.at(-1)).toBe(ORGANIZATION_ID);
  expect(await notModifiedCount("gateway")).toBe(3);
});

it.each([
  ["the listing version moved", { ...held, version: "42" }],
  ["a form change is pending", { ...held, pending: true }],
  ["a registry sync is due", { ...held, syncNeeded: true }],
  ["the state cannot be read", new Error("database down")],
])("asks the catalog when %s", async (_why, current) => {
  state = held;
  await listing();
  state = current;
  const before = h.listRequests.length;
  const res = await listing(ETAG);
  // The fake catalog still reports the same ETag, so its own answer is the 304.
  expect(res.status).toBe(304);
  expect(h.listRequests.length).toBe(before + 1);
  expect(h.listRequests.at(-1)).toMatchObject({ organizationId: ORGANIZATION_ID, ifNoneMatch: ETAG });
  expect(await notModifiedCount("catalog")).toBeGreaterThanOrEqual(1);
});

it("reads the listing state while the request is being admitted, and answers only once it is", async () => {
  state = held;
  await listing();
  let admit!: () => void;
  h.rateLimiter.gate = new Promise<void>((resolve) => (admit = resolve));
  try {
    const before = stateCalls.length;
    const pending = listing(ETAG);
    await eventually(() => stateCalls.length > before);
    // The statement ran; the request is still waiting for its admission.
    let answered = false;
    void pending.then(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(answered).toBe(false);
    admit();
    expect((await pending).status).toBe(304);
    expect(stateCalls.length).toBe(before + 1);
  } finally {
    h.rateLimiter.gate = undefined;
  }
});

it("starts a burst's statements before admission only up to the guard's early-work bound", async () => {
  state = held;
  await listing();
  let admit!: () => void;
  let answerStatements!: () => void;
  h.rateLimiter.gate = new Promise<void>((resolve) => (admit = resolve));
  stateGate = new Promise<void>((resolve) => (answerStatements = resolve));
  try {
    const before = stateCalls.length;
    const burst = Array.from({ length: 5 }, () => listing(ETAG));
    await eventually(() => stateCalls.length >= before + EARLY_WORK_PER_ORGANIZATION);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stateCalls.length).toBe(before + EARLY_WORK_PER_ORGANIZATION);
    admit();
    // The rest run after admission.
    await eventually(() => stateCalls.length === before + 5);
    answerStatements();
    expect((await Promise.all(burst)).map((r) => r.status)).toEqual([304, 304, 304, 304, 304]);
  } finally {
    h.rateLimiter.gate = undefined;
    stateGate = undefined;
  }
});

// Last: the organization stays refused on this replica for the 429's Retry-After.
it("starts no statement before admission for an organization refused within its Retry-After", async () => {
  state = held;
  await listing();
  h.rateLimiter.reject = Errors.rateLimited({ limit: 600, retryAfter: 30, reset: 30, detail: "over" });
  try {
    const before = stateCalls.length;
    // This replica learns of the refusal from the first 429; the statement it had started is wasted once.
    expect((await listing(ETAG)).status).toBe(429);
    expect(stateCalls.length).toBe(before + 1);
    for (let i = 0; i < 3; i++) expect((await listing(ETAG)).status).toBe(429);
    expect(stateCalls.length).toBe(before + 1);
  } finally {
    h.rateLimiter.reject = undefined;
  }
  // Admitted again: the 304 is still the gateway's, its statement run after admission.
  const before = stateCalls.length;
  expect((await listing(ETAG)).status).toBe(304);
  expect(stateCalls.length).toBe(before + 1);
});

async function notModifiedCount(decidedBy: string): Promise<number> {
  const line = (await metrics.registry.metrics()).split("\n").find((l) => l.startsWith(`listing_not_modified_total{decided_by="${decidedBy}"}`));
  return Number(line?.split(" ").pop() ?? 0);
}

it("asks the catalog when If-None-Match names another ETag, and remembers nothing the catalog did not call settled", async () => {
  state = held;
  await listing();
  let before = h.listRequests.length;
  expect((await listing('"something-else"')).status).toBe(200);
  expect(h.listRequests.length).toBe(before + 1);

  h.catalogResponse = async () => ({ datasets: [], etag: '"held-etag"' });
  try {
    expect((await listing()).status).toBe(200);
    before = h.listRequests.length;
    // The held ETag was never reported settled: the old settled verdict no longer matches it.
    expect((await listing('"held-etag"')).status).toBe(304);
    expect(h.listRequests.length).toBe(before + 1);
  } finally {
    h.catalogResponse = async () => ({ datasets: [{ key: "resources_suppliers" }], etag: ETAG, settledVersion: "41" });
  }
});
