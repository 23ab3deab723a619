import { gunzipSync } from "node:zlib";
import { request } from "undici";
import { AppError } from "@exportsvc/common";
import { auth, eventually, ORGANIZATION_ID, startHarness, type Harness } from "./support/harness";

let h: Harness;
const ETAG = '"listing-v42"';

const suppliers = {
  key: "resources_suppliers",
  childDatasets: [],
  columns: [
    { key: "id", dataType: "uuid" },
    { key: "name", dataType: "text", label: "Name" },
    { key: "_cursor", dataType: "text" },
  ],
  links: { csv: "/v1/datasets/resources_suppliers/csv", deletions: "/v1/datasets/resources_suppliers/deletions" },
  changeToken: "t1",
};
const grid = {
  key: "audit__findings",
  displayName: "Audit - Findings",
  parentDataset: "audit",
  childDatasets: ["audit__findings__photos"],
  columns: [{ key: "row_index", dataType: "number", label: "Row Index" }],
  links: { csv: "/v1/datasets/audit__findings/csv" },
  changeToken: "t2",
};

beforeAll(async () => {
  h = await startHarness();
  h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
});
afterAll(() => h.close());

describe("GET /v1/datasets", () => {
  it("passes the catalog's entries through as one JSON array, with ETag and Cache-Control", async () => {
    const res = await fetch(`${h.url}/v1/datasets`, { headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("etag")).toBe(ETAG);
    expect(res.headers.get("cache-control")).toBe("private, no-cache");
    const body = await res.json();
    expect(body).toEqual([
      {
        key: "resources_suppliers",
        childDatasets: [],
        columns: [
          { key: "id", dataType: "uuid" },
          { key: "name", dataType: "text", label: "Name" },
          { key: "_cursor", dataType: "text" },
        ],
        links: { csv: "/v1/datasets/resources_suppliers/csv", deletions: "/v1/datasets/resources_suppliers/deletions" },
        changeToken: "t1",
      },
      {
        key: "audit__findings",
        displayName: "Audit - Findings",
        parentDataset: "audit",
        childDatasets: ["audit__findings__photos"],
        columns: [{ key: "row_index", dataType: "number", label: "Row Index" }],
        links: { csv: "/v1/datasets/audit__findings/csv" },
        changeToken: "t2",
      },
    ]);
    expect(JSON.stringify(body)).not.toContain("null");
    expect(h.listRequests.at(-1)).toMatchObject({ organizationId: ORGANIZATION_ID });
    await eventually(() => h.rateLimiter.inFlight === 0);
  });

  it("answers 304 with the ETag and no body when If-None-Match matches", async () => {
    for (const ifNoneMatch of [ETAG, `W/${ETAG}`, `"older", ${ETAG}`, "*"]) {
      const res = await request(`${h.url}/v1/datasets`, { headers: { ...auth, "if-none-match": ifNoneMatch } });
      expect(res.statusCode).toBe(304);
      expect(res.headers.etag).toBe(ETAG);
      expect(res.headers["cache-control"]).toBe("private, no-cache");
      expect(await res.body.text()).toBe("");
    }
  });

  it("passes If-None-Match to the catalog and answers 304 when the catalog says notModified (cheap 304)", async () => {
    const previous = h.catalogResponse;
    h.catalogResponse = async () => ({ datasets: [], etag: ETAG, notModified: true });
    try {
      const res = await request(`${h.url}/v1/datasets`, { headers: { ...auth, "if-none-match": ETAG } });
      expect(res.statusCode).toBe(304);
      expect(res.headers.etag).toBe(ETAG);
      expect(await res.body.text()).toBe("");
      expect(h.listRequests.at(-1)).toMatchObject({ organizationId: ORGANIZATION_ID, ifNoneMatch: ETAG });
    } finally {
      h.catalogResponse = previous;
    }
    await fetch(`${h.url}/v1/datasets`, { headers: auth }).then((r) => r.arrayBuffer());
    expect(h.listRequests.at(-1)?.ifNoneMatch).toBeUndefined();
  });

  it("answers 200 when If-None-Match does not match", async () => {
    const res = await fetch(`${h.url}/v1/datasets`, { headers: { ...auth, "if-none-match": '"listing-v41"' } });
    expect(res.status).toBe(200);
    expect(res.headers.get("etag")).toBe(ETAG);
    expect(await res.json()).toHaveLength(2);
  });

  it("gzips a listing worth compressing when the client accepts gzip", async () => {
    const many = Array.from({ length: 200 }, (_, i) => ({ ...suppliers, key: `dataset_${i}` }));
    h.catalogResponse = async () => ({ datasets: many, etag: ETAG });
    try {
      const res = await request(`${h.url}/v1/datasets`, { headers: { ...auth, "accept-encoding": "gzip" } });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-encoding"]).toBe("gzip");
      expect(res.headers.etag).toBe(ETAG);
      const listing = JSON.parse(gunzipSync(Buffer.from(await res.body.arrayBuffer())).toString("utf8"));
      expect(listing).toHaveLength(200);
      expect(listing[199].key).toBe("dataset_199");

      const plain = await request(`${h.url}/v1/datasets`, { headers: auth });
      expect(plain.headers["content-encoding"]).toBeUndefined();
      expect(JSON.parse(await plain.body.text())).toHaveLength(200);
    } finally {
      h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
    }
  });

  it("streams a listing larger than the held-back head: whole array, ETag in the headers, no Content-Length", async () => {
    const many = Array.from({ length: 3000 }, (_, i) => ({ ...suppliers, key: `dataset_${i}` }));
    h.catalogResponse = async () => ({ datasets: many, etag: ETAG, entriesPerPiece: 37 });
    try {
      const res = await request(`${h.url}/v1/datasets`, { headers: auth });
      expect(res.statusCode).toBe(200);
      expect(res.headers.etag).toBe(ETAG);
      expect(res.headers["cache-control"]).toBe("private, no-cache");
      expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
      expect(res.headers["content-length"]).toBeUndefined();
      const text = await res.body.text();
      expect(text.length).toBeGreaterThan(64 * 1024);
      expect(JSON.parse(text)).toEqual(many);
      await eventually(() => h.rateLimiter.inFlight === 0);
    } finally {
      h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
    }
  });

  it("answers a catalog failure before any entry was committed as a problem response", async () => {
    const failure = new AppError({ status: 503, errorCode: "DATABASE_UNAVAILABLE", title: "Service Unavailable", detail: "down" });
    for (const failAfterEntries of [0, 40]) {
      h.catalogResponse = async () => ({ datasets: [suppliers, ...Array.from({ length: 60 }, () => grid)], etag: ETAG, entriesPerPiece: 20, failAfterEntries, failure });
      try {
        const res = await request(`${h.url}/v1/datasets`, { headers: auth });
        expect(res.statusCode).toBe(503);
        expect(res.headers["content-type"]).toContain("application/problem+json");
        expect(JSON.parse(await res.body.text())).toMatchObject({ errorCode: "DATABASE_UNAVAILABLE" });
      } finally {
        h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
      }
    }
  });

  it("aborts a listing that fails after the 200 was committed: the body never parses as JSON", async () => {
    const many = Array.from({ length: 3000 }, (_, i) => ({ ...suppliers, key: `dataset_${i}` }));
    for (const encoding of ["identity", "gzip"]) {
      h.catalogResponse = async () => ({ datasets: many, etag: ETAG, entriesPerPiece: 100, failAfterEntries: 2500 });
      try {
        const res = await request(`${h.url}/v1/datasets`, { headers: { ...auth, "accept-encoding": encoding } });
        expect(res.statusCode).toBe(200);
        const body = await res.body.arrayBuffer().then(
          (bytes) => Buffer.from(bytes),
          () => undefined,
        );
        // Either the client saw the abort (no final chunk), or whatever it kept is not a whole array.
        if (body !== undefined) {
          const text = encoding === "gzip" ? (() => { try { return gunzipSync(body).toString("utf8"); } catch { return ""; } })() : body.toString("utf8");
          expect(() => JSON.parse(text)).toThrow();
        }
        expect(h.logs.join("")).toContain("listing stream failed after the 200 was sent");
      } finally {
        h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
      }
    }
    await eventually(() => h.rateLimiter.inFlight === 0);
  });
});

describe("GET /v1/datasets past CATALOG_DEADLINE_MS", () => {
  it("answers 503 when the catalog sends no head within the deadline", async () => {
    const slow = await startHarness({ catalogDeadlineMs: 200 });
    try {
      slow.catalogResponse = () => new Promise(() => undefined);
      const res = await request(`${slow.url}/v1/datasets`, { headers: auth });
      expect(res.statusCode).toBe(503);
      expect(JSON.parse(await res.body.text())).toMatchObject({ errorCode: "DATABASE_UNAVAILABLE" });
    } finally {
      await slow.close();
    }
  });
});
