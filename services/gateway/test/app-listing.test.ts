import { gunzipSync } from "node:zlib";
import { request } from "undici";
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
  csvPath: "/v1/datasets/resources_suppliers/csv",
  changeToken: "t1",
};
const grid = {
  key: "audit__findings",
  displayName: "Audit - Findings",
  parentDataset: "audit",
  childDatasets: ["audit__findings__photos"],
  columns: [{ key: "row_index", dataType: "number", label: "Row Index" }],
  csvPath: "/v1/datasets/audit__findings/csv",
  changeToken: "t2",
};

beforeAll(async () => {
  h = await startHarness();
  h.catalogResponse = async () => ({ datasets: [suppliers, grid], etag: ETAG });
});
afterAll(() => h.close());

describe("GET /v1/datasets", () => {
  it("answers the listing with absent fields omitted (never null), links.csv, ETag and Cache-Control", async () => {
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
        links: { csv: "/v1/datasets/resources_suppliers/csv" },
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
});
