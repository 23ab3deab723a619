/**
 * Conformance, black-box over HTTP against the started stack: one test per row of docs/contract.md §10's
 * CSV-endpoint parameter table and of the error table rows that concern parameters and cursors.
 */
import { startE2E, type E2E } from "../support/fixture";
import { csv, problem, qs } from "./helpers";

const DS = "resources_suppliers";
const path = (params: Record<string, string | number | undefined> = {}, ds = DS) => `/v1/datasets/${ds}/csv${qs(params)}`;

describe("conformance: CSV endpoint parameters and cursor errors", () => {
  let e2e: E2E;
  let all: Record<string, string>[];

  beforeAll(async () => {
    e2e = await startE2E();
    all = (await csv(await e2e.get(path()))).rows;
    if (all.length < 4) throw new Error("the demo organization needs at least 4 suppliers for these tests");
  }, 120_000);
  afterAll(() => e2e?.stop());

  describe("cursor", () => {
    it("omitted: starts from the beginning", async () => {
      const page = await csv(await e2e.get(path({ limit: 2 })));
      expect(page.rows.map((r) => r.id)).toEqual(all.slice(0, 2).map((r) => r.id));
    });

    it("any row's cursor is valid, not only the last, and resumes strictly after that row", async () => {
      const page = await csv(await e2e.get(path({ cursor: all[1]._cursor })));
      expect(page.rows.map((r) => r.id)).toEqual(all.slice(2).map((r) => r.id));
    });

    it("contains characters that need URL-encoding and is sent back unchanged", () => {
      expect(all.some((r) => /[+/=]/.test(r._cursor))).toBe(true);
    });

    it.each(["modifiedSince", "after", "afterRowIndex"])("combined with %s: 400 INVALID_CURSOR", async (other) => {
      const extra: Record<string, string> = {
        modifiedSince: all[0].last_modified,
        after: all[0].id,
        afterRowIndex: "1",
      };
      const body = await problem(await e2e.get(path({ cursor: all[0]._cursor, [other]: extra[other] })), 400);
      expect(body.errorCode).toBe("INVALID_CURSOR");
      expect(body.title).toBe("Invalid cursor");
    });

    it("truncated: 400 INVALID_CURSOR, never a first page", async () => {
      const c = all[0]._cursor;
      const body = await problem(await e2e.get(path({ cursor: c.slice(0, c.length - 6) })), 400);
      expect(body.errorCode).toBe("INVALID_CURSOR");
    });

    it("altered: 400 INVALID_CURSOR", async () => {
      const c = all[0]._cursor;
      const i = Math.floor(c.length / 2);
      const altered = c.slice(0, i) + (c[i] === "A" ? "B" : "A") + c.slice(i + 1);
      expect((await problem(await e2e.get(path({ cursor: altered })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("issued to another organization for its dataset of the same key and shape: 400 INVALID_CURSOR, like an altered cursor", async () => {
      const other = await e2e.newOrganization();
      // Same attribute definitions (ids too, so the columns come out in the same order): same row shape.
      await e2e.pool.query(
        `INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type, position, created_at)
         SELECT $1, id, resource_kind, key, name, type, position, created_at FROM custom_attribute_definitions
         WHERE organization_id = $2 AND resource_kind = 'suppliers'`,
        [other.organizationId, e2e.organizationId],
      );
      await e2e.pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'Other Org Supplier')`, [other.organizationId]);
      const shapes = `SELECT count(*) FILTER (WHERE organization_id = $1)::int AS other, count(DISTINCT shape_fingerprint)::int AS distinct_shapes
        FROM dataset_registry WHERE key = $3 AND organization_id IN ($1, $2)`;
      for (let attempt = 0; ; attempt++) {
        const { rows } = await e2e.pool.query(shapes, [other.organizationId, e2e.organizationId, DS]);
        if (rows[0].other === 1 && rows[0].distinct_shapes === 1) break;
        if (attempt >= 200) throw new Error("the other organization's registry never reached the demo's supplier shape");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const asOther = { Authorization: `Bearer ${other.secret}` };
      const own = await csv(await e2e.get(path(), asOther));
      expect(own.rows.map((r) => r.name)).toEqual(["Other Org Supplier"]);

      const body = await problem(await e2e.get(path({ cursor: all[0]._cursor }), asOther), 400);
      expect(body.errorCode).toBe("INVALID_CURSOR");
      expect(body.cursorProblem).toBe("altered");
    });

    it("issued for a different dataset: 400 INVALID_CURSOR", async () => {
      const body = await problem(await e2e.get(path({ cursor: all[0]._cursor }, "resources_products")), 400);
      expect(body.errorCode).toBe("INVALID_CURSOR");
    });

    it.each([["empty", ""], ["not a cursor", "hello"], ["base64 noise", "QUJDREVGR0hJSktMTU5PUA=="]])("%s: 400 INVALID_CURSOR", async (_name, value) => {
      expect((await problem(await e2e.get(path({ cursor: value })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("issued by a cursor version no longer read: 400 INVALID_CURSOR", async () => {
      const bytes = Buffer.from(all[0]._cursor, "base64");
      bytes[0] = bytes[0] === 0 ? 0xff : 0;
      expect((await problem(await e2e.get(path({ cursor: bytes.toString("base64") })), 400)).errorCode).toBe("INVALID_CURSOR");
    });
  });

  describe("modifiedSince / after (original paging parameters)", () => {
    it("page exactly like the cursor of that row", async () => {
      const byCursor = await csv(await e2e.get(path({ cursor: all[1]._cursor })));
      const byOriginal = await csv(await e2e.get(path({ modifiedSince: all[1].last_modified, after: all[1].id })));
      expect(byOriginal.rows.map((r) => r.id)).toEqual(byCursor.rows.map((r) => r.id));
    });

    it("a raw + arriving as a space: 400 naming modifiedSince", async () => {
      // The value as received in the CSV, with its space encoded but its '+' left raw.
      const raw = all[1].last_modified.replace(" ", "%20");
      expect(raw).toMatch(/\+00$/);
      const body = await problem(await e2e.get(`/v1/datasets/${DS}/csv?modifiedSince=${raw}&after=${all[1].id}`), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
      expect(Object.keys(body.errors ?? {})).toEqual(["modifiedSince"]);
    });

    it("only one of modifiedSince and after: 400 INVALID_CURSOR", async () => {
      expect((await problem(await e2e.get(path({ modifiedSince: all[1].last_modified })), 400)).errorCode).toBe("INVALID_CURSOR");
      expect((await problem(await e2e.get(path({ after: all[1].id })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("after that is not a uuid: 400 naming after", async () => {
      const body = await problem(await e2e.get(path({ modifiedSince: all[1].last_modified, after: "nope" })), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
      expect(body.errors).toHaveProperty("after");
    });

    it("a rounded modifiedSince is still parsed (microsecond precision is the caller's duty)", async () => {
      const res = await e2e.get(path({ modifiedSince: "2020-01-01T00:00:00Z", after: all[0].id }));
      expect((await csv(res)).rows.length).toBe(all.length);
    });
  });

  describe("afterRowIndex", () => {
    it("on a dataset that has no row_index: 400 INVALID_PARAMETER", async () => {
      const body = await problem(await e2e.get(path({ modifiedSince: all[1].last_modified, after: all[1].id, afterRowIndex: 1 })), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
    });

    it("without after: 400 INVALID_CURSOR", async () => {
      expect((await problem(await e2e.get(path({ afterRowIndex: 1 })), 400)).errorCode).toBe("INVALID_CURSOR");
    });

    it("not an integer: 400 naming afterRowIndex", async () => {
      const body = await problem(await e2e.get(path({ modifiedSince: all[1].last_modified, after: all[1].id, afterRowIndex: "1.5" })), 400);
      expect(body.errors).toHaveProperty("afterRowIndex");
    });
  });

  describe("limit", () => {
    it("default is 5000 and the end of data is a page with fewer rows than the limit", async () => {
      expect((await csv(await e2e.get(path()))).rows.length).toBe(all.length);
      const page = await csv(await e2e.get(path({ limit: all.length - 1 })));
      expect(page.rows.length).toBe(all.length - 1);
    });

    it.each([[0], [5001], [-3]])("%s: 400 Invalid parameter (rejected, never reduced)", async (limit) => {
      const body = await problem(await e2e.get(path({ limit })), 400);
      expect(body).toMatchObject({ errorCode: "INVALID_PARAMETER", title: "Invalid parameter" });
      expect(body.errors).toHaveProperty("limit");
    });

    it("5000 and 1 are accepted", async () => {
      expect((await csv(await e2e.get(path({ limit: 5000 })))).rows.length).toBe(all.length);
      expect((await csv(await e2e.get(path({ limit: 1 })))).rows.length).toBe(1);
    });

    it("non-numeric: 400 naming limit", async () => {
      const body = await problem(await e2e.get(path({ limit: "ten" })), 400);
      expect(body.errors).toHaveProperty("limit");
    });
  });

  describe("from / to", () => {
    it("on a dataset without completed_at: 400 INVALID_PARAMETER", async () => {
      const body = await problem(await e2e.get(path({ from: "2024-01-01T00:00:00Z" })), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
    });

    it("unparsable: 400 naming the parameter", async () => {
      const body = await problem(await e2e.get(path({ to: "yesterday" })), 400);
      expect(body.errors).toHaveProperty("to");
    });
  });

  it("unknown query parameters are ignored (a misspelt name gives the first page again)", async () => {
    const page = await csv(await e2e.get(path({ cursr: all[2]._cursor, limit: 2 })));
    expect(page.rows.map((r) => r.id)).toEqual(all.slice(0, 2).map((r) => r.id));
  });

  describe("precedence", () => {
    it("every unparsable parameter is named at once", async () => {
      const body = await problem(await e2e.get(path({ limit: "x", after: "y", modifiedSince: "z", afterRowIndex: "w" })), 400);
      expect(Object.keys(body.errors ?? {}).sort()).toEqual(["after", "afterRowIndex", "limit", "modifiedSince"]);
    });

    it("an unparsable parameter wins over an unknown dataset", async () => {
      const body = await problem(await e2e.get(path({ limit: "x" }, "no_such_dataset")), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
    });

    it("an unknown dataset wins over a merely wrong parameter", async () => {
      expect((await problem(await e2e.get(path({ limit: 9999 }, "no_such_dataset")), 404)).errorCode).toBe("DATASET_NOT_FOUND");
      expect((await problem(await e2e.get(path({ cursor: "junk" }, "no_such_dataset")), 404)).errorCode).toBe("DATASET_NOT_FOUND");
    });
  });

  it("a dataset key that does not exist: 404 Dataset not found; a path matching no endpoint: plain 404 Not Found", async () => {
    const ds = await problem(await e2e.get(path({}, "no_such_dataset")), 404);
    expect(ds).toMatchObject({ errorCode: "DATASET_NOT_FOUND", title: "Dataset not found" });
    const route = await problem(await e2e.get("/v1/v1/datasets"), 404);
    expect(route).toMatchObject({ errorCode: "NOT_FOUND", title: "Not Found" });
  });

  it("a field of hundreds of thousands of characters (quotes, commas, newlines) arrives whole in one CSV field", async () => {
    const { organizationId, secret } = await e2e.newOrganization();
    const big = `start "quoted", line\n${"x,\"y\"\r\n".repeat(45_000)}end`;
    expect(big.length).toBeGreaterThan(300_000);
    await e2e.pool.query("INSERT INTO suppliers (organization_id, id, name, description) VALUES ($1, gen_random_uuid(), 'Big', $2)", [organizationId, big]);
    const res = await fetch(`${e2e.baseUrl}${path()}`, { headers: { Authorization: `Bearer ${secret}` } });
    const page = await csv(res);
    expect(page.rows).toHaveLength(1);
    expect(page.rows[0].description).toBe(big);
  });
});
