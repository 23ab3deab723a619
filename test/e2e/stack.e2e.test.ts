/**
 * End to end: the four services as separate processes, HTTP to the gateway, the demo organization.
 * Pages every dataset to the end with the spec's cursor loop at several limits and checks counts,
 * order, duplicates, the CSV dialect and every value's type against the listing.
 */
import { startE2E, type E2E } from "../support/fixture";
import { parseCsvPage, valueProblem } from "../support/csv";
import { OpenApiValidator } from "../support/openapi";

interface ListedColumn { key: string; dataType: string; label?: string }
interface ListedDataset {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: string[];
  columns: ListedColumn[];
  links: { csv: string };
  changeToken: string;
}

describe("end to end over HTTP", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  const get = (path: string, headers: Record<string, string> = {}) => e2e.get(path, headers);

  async function listing(): Promise<ListedDataset[]> {
    const res = await get("/v1/datasets");
    expect(res.status).toBe(200);
    return (await res.json()) as ListedDataset[];
  }

  /** The spec's loop: no cursor, then the last row's _cursor, until a page has fewer rows than the limit. */
  async function pageToEnd(ds: ListedDataset, limit: number) {
    const all: Record<string, string>[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const qs = new URLSearchParams({ limit: String(limit) });
      if (cursor) qs.set("cursor", cursor);
      const res = await get(`${ds.links.csv}?${qs}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`${ds.key} page ${pages}: HTTP ${res.status} ${body.toString()}`);
      expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8");
      expect(res.headers.get("content-length")).toBeNull();
      const page = parseCsvPage(body);
      expect(page.header).toEqual(ds.columns.map((c) => c.key));
      expect(page.raw.includes("\r\n")).toBe(false);
      all.push(...page.rows);
      pages++;
      if (page.rows.length < limit) break;
      cursor = page.rows[page.rows.length - 1]._cursor;
      expect(cursor).toMatch(/^[A-Za-z0-9+/=]+$/);
      if (pages > 10_000) throw new Error("paging did not end");
    }
    return { rows: all, pages };
  }

  it("lists every fixed dataset with _cursor last and links resolvable against the base URL", async () => {
    const datasets = await listing();
    const keys = datasets.map((d) => d.key);
    for (const k of ["resources_suppliers", "resources_customers", "resources_products", "resources_product_categories", "resources_equipment", "resources_chemicals", "resources_employees", "resources_areas", "resources_lots", "resources_recipes", "resources_documents", "deviations"]) {
      expect(keys).toContain(k);
    }
    for (const d of datasets) {
      expect(d.columns[d.columns.length - 1]).toMatchObject({ key: "_cursor", dataType: "text" });
      expect(d.links.csv).toBe(`/v1/datasets/${encodeURIComponent(d.key)}/csv`);
      expect(typeof d.changeToken).toBe("string");
      if (d.key.startsWith("resources_")) expect(d.displayName).toBeUndefined();
      for (const value of Object.values(d)) expect(value).not.toBeNull();
    }
  });

  it("pages every dataset to the end at several limits with identical, ordered, duplicate-free results", async () => {
    const datasets = await listing();
    for (const ds of datasets) {
      const full = await pageToEnd(ds, 5000);
      const keyOf = (r: Record<string, string>) => (r.row_index !== undefined ? `${r.id}/${r.row_index}` : r.id);
      const ids = full.rows.map(keyOf);
      expect(new Set(ids).size).toBe(ids.length);
      // Order: last_modified, id (, row_index). The text forms sort like the instants (fixed width, UTC).
      for (let i = 1; i < full.rows.length; i++) {
        const a = full.rows[i - 1];
        const b = full.rows[i];
        const cmp = a.last_modified.localeCompare(b.last_modified) || a.id.localeCompare(b.id) || Number(a.row_index ?? 0) - Number(b.row_index ?? 0);
        expect(cmp).toBeLessThan(0);
      }
      for (const col of ds.columns) {
        for (const row of full.rows) {
          const problem = valueProblem(col.dataType, row[col.key]);
          if (problem) throw new Error(`${ds.key}.${col.key}: ${problem}`);
        }
      }
      for (const limit of [3, 1]) {
        if (limit === 1 && full.rows.length > 60) continue;
        const small = await pageToEnd(ds, limit);
        expect(small.rows.map(keyOf)).toEqual(ids);
        expect(small.rows.map((r) => r._cursor)).toEqual(full.rows.map((r) => r._cursor));
      }
    }
  }, 180_000);

  it("exports exactly the organization's rows of the fixed datasets", async () => {
    const counts: Array<[string, string]> = [
      ["resources_suppliers", "suppliers"],
      ["resources_products", "products"],
      ["resources_lots", "lots"],
      ["resources_documents", "documents"],
      ["deviations", "deviations"],
    ];
    const datasets = await listing();
    for (const [key, table] of counts) {
      const ds = datasets.find((d) => d.key === key)!;
      const { rows } = await pageToEnd(ds, 5000);
      const expected = Number((await e2e.pool.query(`SELECT count(*) FROM ${table} WHERE organization_id = $1`, [e2e.organizationId])).rows[0].count);
      expect(expected).toBeGreaterThan(0);
      expect(rows.length).toBe(expected);
    }
  });

  it("answers problem+json for a missing key, an unknown dataset and an unknown route", async () => {
    const noKey = await fetch(`${e2e.baseUrl}/v1/datasets`);
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get("content-type")).toContain("application/problem+json");
    const body = (await noKey.json()) as any;
    expect(body.errorCode).toBe("UNAUTHORIZED");
    expect(body.detail).toBeUndefined();
    const missing = await get("/v1/datasets/no_such_dataset/csv");
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).errorCode).toBe("DATASET_NOT_FOUND");
    const route = await get("/v1/nowhere");
    expect(route.status).toBe(404);
    expect(await route.json()).toMatchObject({ errorCode: "NOT_FOUND", title: "Not Found" });
  });

  it("live responses match the OpenAPI document the gateway serves", async () => {
    const openapi = await OpenApiValidator.fetch(e2e.baseUrl);
    const listing = await get("/v1/datasets");
    openapi.validate("/v1/datasets", "get", 200, "application/json", await listing.json());
    const unauthorized = await fetch(`${e2e.baseUrl}/v1/datasets`);
    openapi.validate("/v1/datasets", "get", 401, "application/problem+json", await unauthorized.json());
    const csvPath = "/v1/datasets/{datasetKey}/csv";
    const page = await get("/v1/datasets/deviations/csv?limit=2");
    expect(page.status).toBe(200);
    openapi.validate(csvPath, "get", 200, "text/csv", undefined);
    await page.arrayBuffer();
    const bad = await get("/v1/datasets/deviations/csv?limit=x&after=y");
    openapi.validate(csvPath, "get", 400, "application/problem+json", await bad.json());
    const missing = await get("/v1/datasets/nope/csv");
    openapi.validate(csvPath, "get", 404, "application/problem+json", await missing.json());
    // The validator itself must reject a body that breaks the schema.
    expect(() => openapi.validate("/v1/datasets", "get", 200, "application/json", [{ key: 1 }])).toThrow(/does not match/);
  });
});
