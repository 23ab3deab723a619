/**
 * Conformance: what a changeToken promises (docs/contract.md §3: "Same token: none of the dataset's own records
 * changed, so the CSV call may be skipped"; docs/catalog.md, "What a changeToken promises").
 *
 * A loader that follows docs/contract.md §3 to the letter (skip the CSV call while the token is
 * unchanged, page from the stored cursor to a short page otherwise, then store the token) must end
 * with every committed edit, whatever other sessions do meanwhile. Reproduces issue 18: an edit
 * committed while another transaction was open moved the token, the page from the cursor held the
 * edit back, and when the other transaction ended the token did not move again.
 */
import { randomUUID } from "node:crypto";
import { Client } from "pg";
import { startE2E, type E2E } from "../support/fixture";
import { testDatabaseUrl } from "../support/db";
import { csv } from "./helpers";

const DS = "resources_suppliers";

describe("conformance: a changeToken never runs ahead of the CSV", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  /** The loader of docs/contract.md §3–§4: token-gated incremental sync of one dataset into a map. */
  class SpecLoader {
    token?: string;
    cursor?: string;
    readonly copy = new Map<string, Record<string, string>>();
    constructor(private readonly secret: string) {}

    private get(path: string) {
      return e2e.get(path, { Authorization: `Bearer ${this.secret}` });
    }

    async listedToken(): Promise<string> {
      const res = await this.get("/v1/datasets");
      expect(res.status).toBe(200);
      const entry = ((await res.json()) as { key: string; changeToken: string }[]).find((d) => d.key === DS);
      return entry!.changeToken;
    }

    async pageFromCursor(): Promise<Record<string, string>[]> {
      return (await csv(await this.get(`/v1/datasets/${DS}/csv${this.cursor ? `?cursor=${encodeURIComponent(this.cursor)}` : ""}`))).rows;
    }

    /** One sync round; returns the rows fetched, or "skipped" when the token had not moved. */
    async sync(): Promise<Record<string, string>[] | "skipped"> {
      const token = await this.listedToken();
      if (token === this.token) return "skipped";
      const rows = await this.pageFromCursor(); // default limit 5000: one short page ends the round here
      for (const r of rows) this.copy.set(r.id, r);
      if (rows.length > 0) this.cursor = rows[rows.length - 1]._cursor;
      this.token = token;
      return rows;
    }
  }

  async function organizationWithSupplier() {
    const { organizationId, secret } = await e2e.newOrganization();
    const id = randomUUID();
    await e2e.pool.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'original')", [organizationId, id]);
    const loader = new SpecLoader(secret);
    expect(await loader.sync()).toHaveLength(1);
    return { organizationId, id, loader };
  }

  async function openSession(statements: string[]) {
    const other = new Client({ connectionString: testDatabaseUrl(), application_name: "bi-dashboard" });
    await other.connect();
    for (const sql of statements) await other.query(sql);
    return other;
  }

  const edit = (organizationId: string, id: string) =>
    e2e.pool.query("UPDATE suppliers SET name = 'edited', last_modified = now() WHERE organization_id = $1 AND id = $2", [organizationId, id]);

  it("an edit held back behind an open writer moves the token again once it is servable", async () => {
    const { organizationId, id, loader } = await organizationWithSupplier();
    // Another writer (it holds a transaction id) of no declared organization: it holds every
    // organization's newest rows until it ends.
    const writer = await openSession(["BEGIN", "SELECT pg_current_xact_id()"]);
    try {
      await edit(organizationId, id);
      const held = await loader.sync();
      expect(held).toEqual([]); // the token moved, the edit is not servable yet: the page is empty
      expect(await loader.sync()).toBe("skipped"); // nothing more is servable: same token
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    const released = await loader.sync();
    expect(released).not.toBe("skipped");
    expect(loader.copy.get(id)?.name).toBe("edited");
    expect(await loader.sync()).toBe("skipped");
  });

  it("an open read-only transaction (a report, pg_dump) holds nothing back", async () => {
    const { organizationId, id, loader } = await organizationWithSupplier();
    const reader = await openSession(["BEGIN", "SELECT count(*) FROM sites"]);
    try {
      await edit(organizationId, id);
      const rows = await loader.sync();
      expect(rows).not.toBe("skipped");
      expect((rows as Record<string, string>[]).map((r) => r.name)).toEqual(["edited"]);
      await reader.query("COMMIT");
    } finally {
      await reader.end();
    }
    expect(loader.copy.get(id)?.name).toBe("edited");
  });

  it("same token, same servable rows: the cursor then serves nothing new", async () => {
    const { organizationId, id, loader } = await organizationWithSupplier();
    const writer = await openSession(["BEGIN", "SELECT pg_current_xact_id()"]);
    try {
      await edit(organizationId, id);
      await loader.sync();
      // Whenever the listed token equals the stored one, a page from the stored cursor is empty.
      expect(await loader.listedToken()).toBe(loader.token);
      expect(await loader.pageFromCursor()).toEqual([]);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    expect(await loader.listedToken()).not.toBe(loader.token);
    expect((await loader.pageFromCursor()).map((r) => r.id)).toEqual([id]);
  });
});
