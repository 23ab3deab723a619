/**
 * Conformance of the deletion feed (docs/api.md, "Deletions and rewrites") through the real stack:
 * gateway, catalog, export and schema services as processes, over HTTP.
 */
import { pruneTombstones } from "@exportsvc/datasets";
import { startE2E, type E2E } from "../support/fixture";
import { BOM, parseCsvPage } from "../support/csv";
import { field, formOrganization, idFactory, site, waitFor, type FormOrganization, type Row } from "../support/forms";
import { problem, qs } from "./helpers";

const deletionsPath = (key: string, params: Record<string, string | number | undefined> = {}) =>
  `/v1/datasets/${encodeURIComponent(key)}/deletions${qs(params)}`;

describe("conformance: deletion feed", () => {
  let e2e: E2E;

  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  /** An organization with a form (grid included), three submissions and two suppliers. */
  async function organization(): Promise<{ org: FormOrganization; id: (name: string) => string }> {
    const id = idFactory();
    const org = await formOrganization(e2e, {
      sites: [site(id("site"))],
      suppliers: [{ id: id("sup:1"), name: "Acme" }, { id: id("sup:2"), name: "Bolt" }],
      forms: [{ id: id("form"), name: "Line Check", recordPrefix: "LC", fields: [field.text(id("f:note"), "note"), field.grid(id("f:rows"), "rows", "Rows", [field.text(id("f:item"), "item")])] }],
    });
    await org.waitForDataset("line_check");
    await org.apply({
      submissions: [1, 2, 3].map((n) => ({
        id: id(`sub:${n}`), formId: id("form"), siteId: id("site"), status: "Completed" as const, values: { note: `n${n}`, rows: [{ item: "a" }, { item: "b" }] },
      })),
    });
    await waitFor("three submissions", async () => (await org.page("line_check")).rows.length === 3);
    return { org, id };
  }

  async function deletions(org: FormOrganization, key: string, params: Record<string, string | number | undefined> = {}): Promise<Row[]> {
    const res = await org.get(deletionsPath(key, params));
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) throw new Error(`${key} deletions: HTTP ${res.status} ${body.toString().slice(0, 300)}`);
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
    const page = parseCsvPage(body);
    expect(body.toString("utf8").startsWith(BOM)).toBe(true);
    expect(page.header).toEqual(["id", "deleted_at", "_cursor"]);
    return page.rows;
  }

  it("every listing entry links its deletion feed; a feed with nothing deleted is a header-only page", async () => {
    const { org } = await organization();
    const listing = await org.listing();
    for (const d of listing) expect(d.links.deletions).toBe(`/v1/datasets/${d.key}/deletions`);
    expect(await deletions(org, "line_check")).toEqual([]);
    expect(await deletions(org, "resources_suppliers")).toEqual([]);
  });

  it("a deleted submission reaches the submission and grid feeds, moves the changeToken and leaves the CSV; a deleted supplier its own feed", async () => {
    const { org, id } = await organization();
    const before = (await org.dataset("line_check"))!.changeToken;
    await org.apply({ delete: { submissions: [id("sub:2")], suppliers: [id("sup:1")] } });
    const gone = await waitFor("the tombstone of sub:2", async () => {
      const rows = await deletions(org, "line_check");
      return rows.length ? rows : undefined;
    });
    expect(gone.map((r) => r.id)).toEqual([id("sub:2")]);
    expect(gone[0].deleted_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00$/);
    expect((await deletions(org, "line_check__rows")).map((r) => r.id)).toEqual([id("sub:2")]);
    expect((await deletions(org, "resources_suppliers")).map((r) => r.id)).toEqual([id("sup:1")]);
    expect((await org.dataset("line_check"))!.changeToken).not.toBe(before);
    expect((await org.page("line_check")).rows.map((r) => r.id)).not.toContain(id("sub:2"));
    expect((await org.page("line_check__rows")).rows.map((r) => r.id)).not.toContain(id("sub:2"));
  });

  it("pages with limit and cursor, each tombstone once, and a later deletion arrives behind the held cursor", async () => {
    const { org, id } = await organization();
    await org.apply({ delete: { submissions: [id("sub:1")] } });
    await org.apply({ delete: { submissions: [id("sub:3")] } });
    const first = await waitFor("two tombstones", async () => {
      const rows = await deletions(org, "line_check", { limit: 1 });
      return rows.length === 1 ? rows : undefined;
    });
    expect(first.map((r) => r.id)).toEqual([id("sub:1")]);
    const second = await waitFor("the second tombstone", async () => {
      const rows = await deletions(org, "line_check", { limit: 1, cursor: first[0]._cursor });
      return rows.length === 1 ? rows : undefined;
    });
    expect(second.map((r) => r.id)).toEqual([id("sub:3")]);
    expect(await deletions(org, "line_check", { limit: 1, cursor: second[0]._cursor })).toEqual([]);
    await org.apply({ delete: { submissions: [id("sub:2")] } });
    const late = await waitFor("the third tombstone behind the held cursor", async () => {
      const rows = await deletions(org, "line_check", { cursor: second[0]._cursor });
      return rows.length ? rows : undefined;
    });
    expect(late.map((r) => r.id)).toEqual([id("sub:2")]);
  });

  it("delete and re-create with the same id: the feed holds the tombstone back while the row exists, so a client applying the rule keeps the row; deleted again, both tombstones are served", async () => {
    const { org, id } = await organization();
    await org.apply({ delete: { suppliers: [id("sup:2")] } });
    await org.apply({ suppliers: [{ id: id("sup:2"), name: "Bolt again" }] });
    const row = await waitFor("the re-created row", async () => (await org.page("resources_suppliers")).rows.find((r) => r.id === id("sup:2") && r.name === "Bolt again"));
    expect(row.name).toBe("Bolt again");
    expect((await deletions(org, "resources_suppliers")).map((t) => t.id)).not.toContain(id("sup:2"));
    await org.apply({ delete: { suppliers: [id("sup:2")] } });
    const tombstones = await waitFor("both tombstones", async () => {
      const rows = (await deletions(org, "resources_suppliers")).filter((t) => t.id === id("sup:2"));
      return rows.length === 2 ? rows : undefined;
    });
    // The first is older than the re-created row: a copy that read the row keeps it until the second.
    expect(tombstones[0].deleted_at < row.last_modified).toBe(true);
  });

  it("keeps organizations apart: another organization never sees the feed, and a cursor of one is INVALID_CURSOR for the other", async () => {
    const a = await organization();
    const b = await organization();
    await a.org.apply({ delete: { suppliers: [a.id("sup:1")] } });
    const rowsA = await waitFor("A's tombstone", async () => {
      const rows = await deletions(a.org, "resources_suppliers");
      return rows.length ? rows : undefined;
    });
    expect(await deletions(b.org, "resources_suppliers")).toEqual([]);
    const foreign = await problem(await b.org.get(deletionsPath("resources_suppliers", { cursor: rowsA[0]._cursor })), 400);
    expect(foreign.errorCode).toBe("INVALID_CURSOR");
  });

  it("a deletions cursor before a tombstone pruned by retention is 410 DELETIONS_CURSOR_EXPIRED (problem+json)", async () => {
    const { org } = await organization();
    await e2e.pool.query(
      `INSERT INTO dataset_tombstones (organization_id, scope, id, deleted_at) VALUES
         ($1, 'suppliers', gen_random_uuid(), now() - interval '60 days'), ($1, 'suppliers', gen_random_uuid(), now() - interval '50 days')`,
      [org.organizationId],
    );
    const old = await deletions(org, "resources_suppliers");
    expect(old).toHaveLength(2);
    await pruneTombstones(e2e.pool, 35);
    const expired = await problem(await org.get(deletionsPath("resources_suppliers", { cursor: old[0]._cursor })), 410);
    expect(expired).toMatchObject({ errorCode: "DELETIONS_CURSOR_EXPIRED", title: "Deletions cursor expired" });
    expect(expired.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(await deletions(org, "resources_suppliers", { cursor: old[1]._cursor })).toEqual([]);
  });

  it("same rules as the CSV endpoint: auth, limit, a CSV cursor, unknown dataset; problem+json throughout", async () => {
    const { org } = await organization();
    expect((await problem(await fetch(`${e2e.baseUrl}${deletionsPath("line_check")}`), 401)).errorCode).toBe("UNAUTHORIZED");
    expect((await problem(await org.get(deletionsPath("line_check", { limit: 0 })), 400)).errorCode).toBe("INVALID_PARAMETER");
    expect((await problem(await org.get(deletionsPath("line_check", { limit: 5001 })), 400)).errorCode).toBe("INVALID_PARAMETER");
    const csvCursor = (await org.page("line_check")).rows[0]._cursor;
    expect((await problem(await org.get(deletionsPath("line_check", { cursor: csvCursor })), 400)).errorCode).toBe("INVALID_CURSOR");
    expect((await problem(await org.get(deletionsPath("no_such_dataset")), 404)).errorCode).toBe("DATASET_NOT_FOUND");
  });

  describe("rewriteToken", () => {
    const tokensOf = async (org: FormOrganization) => new Map((await org.listing()).map((d) => [d.key, { change: d.changeToken, rewrite: d.rewriteToken }]));

    it("an edit moves only the changeToken; a renamed site reaches the rewrite feed of the datasets showing it, moving their changeToken and no rewriteToken", async () => {
      const { org, id } = await organization();
      const start = await tokensOf(org);
      for (const [, t] of start) expect(t.rewrite).toMatch(/^[A-Za-z0-9_-]{22}$/);
      await org.apply({ submissions: [{ id: id("sub:1"), formId: id("form"), siteId: id("site"), status: "Completed", values: { note: "edited", rows: [] } }] });
      const edited = await waitFor("the edit in the listing", async () => {
        const now = await tokensOf(org);
        return now.get("line_check")!.change !== start.get("line_check")!.change ? now : undefined;
      });
      expect(edited.get("line_check")!.rewrite).toBe(start.get("line_check")!.rewrite);
      await org.apply({ sites: [site(id("site"), "Renamed Site")] });
      const renamed = await waitFor("the rename in the listing", async () => {
        const now = await tokensOf(org);
        return now.get("line_check")!.change !== edited.get("line_check")!.change ? now : undefined;
      });
      // The submission dataset shows site_name live: its old rows' text changed without last_modified
      // moving, and the rewrite feed serves them with the new name, as the CSV endpoint renders them.
      const page = await org.page("line_check");
      expect(page.rows.every((r) => r.site_name === "Renamed Site")).toBe(true);
      const feed = await waitFor("the rename in the rewrite feed", async () => {
        const res = await org.get(`/v1/datasets/line_check/rewrites`);
        expect(res.status).toBe(200);
        const text = await res.text();
        return text.includes("Renamed Site") ? text : undefined;
      });
      expect(feed.replace(/^\ufeff/, "").split("\n")[0]).toBe(page.header.join(","));
      for (const [key, t] of renamed) expect([key, t.rewrite]).toEqual([key, edited.get(key)!.rewrite]);
      // A dataset that does not show the site is untouched.
      expect(renamed.get("resources_suppliers")!.change).toBe(edited.get("resources_suppliers")!.change);
      const suppliers = await org.get(`/v1/datasets/resources_suppliers/rewrites`);
      expect((await suppliers.text()).trim().split("\n")).toHaveLength(1);
    });

    it("a republish moves the rewriteToken of the form's datasets (stored rows re-rendered)", async () => {
      const { org, id } = await organization();
      const before = await tokensOf(org);
      await org.apply({
        forms: [{ id: id("form"), name: "Line Check", recordPrefix: "LC", fields: [field.text(id("f:note"), "note", "Note (relabelled)"), field.grid(id("f:rows"), "rows", "Rows", [field.text(id("f:item"), "item")])] }],
      });
      const after = await waitFor("the republish", async () => {
        const now = await tokensOf(org);
        return now.get("line_check")!.rewrite !== before.get("line_check")!.rewrite ? now : undefined;
      });
      expect(after.get("line_check__rows")!.rewrite).not.toBe(before.get("line_check__rows")!.rewrite);
      expect(after.get("resources_suppliers")!.rewrite).toBe(before.get("resources_suppliers")!.rewrite);
    });
  });
});
