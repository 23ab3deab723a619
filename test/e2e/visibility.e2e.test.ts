/**
 * No-miss paging: a row whose last_modified was stamped by a transaction still open when a page
 * was served is not skipped by the cursor handed out with that page. Only writers hold the horizon
 * back, and a writer that declares its organization holds back only that organization's rows.
 */
import { randomUUID } from "node:crypto";
import { Client } from "pg";
import { declaredWriterApplicationName } from "@exportsvc/common";
import { startE2E, type E2E } from "../support/fixture";
import { testDatabaseUrl } from "../support/db";
import { parseCsvPage } from "../support/csv";

describe("visibility horizon (no-miss paging)", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(() => e2e?.stop());

  async function page(secret: string, cursor?: string) {
    const qs = cursor ? `?cursor=${encodeURIComponent(cursor)}` : "";
    const res = await fetch(`${e2e.baseUrl}/v1/datasets/resources_chemicals/csv${qs}`, { headers: { Authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    return parseCsvPage(Buffer.from(await res.arrayBuffer())).rows;
  }

  const insert = (stamp: string) => `INSERT INTO chemicals (organization_id, id, name, last_modified) VALUES ($1, $2, $3, ${stamp})`;

  async function writerSession(applicationName = "source-system") {
    const writer = new Client({ connectionString: testDatabaseUrl(), application_name: applicationName });
    await writer.connect();
    await writer.query("BEGIN");
    return writer;
  }

  it("holds back rows behind an open writer, then serves its late row to the held cursor", async () => {
    const { organizationId, secret } = await e2e.newOrganization();
    const first = randomUUID();
    await e2e.pool.query(insert("clock_timestamp()"), [organizationId, first, "committed before"]);

    // A writer's transaction writes elsewhere first (its rows' stamps are taken then, once per
    // transaction) and stays open...
    const writer = await writerSession();
    const late = randomUUID();
    try {
      await writer.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'same transaction')", [organizationId, randomUUID()]);
      // ...while another row, stamped later, commits at once: without a horizon it would be served
      // now, and its cursor would pass the writer's row for good.
      const later = randomUUID();
      await e2e.pool.query(insert("clock_timestamp()"), [organizationId, later, "committed after"]);

      const before = await page(secret);
      expect(before.map((r) => r.id)).toEqual([first]);
      const cursor = before[before.length - 1]._cursor;

      await writer.query(insert("now()"), [organizationId, late, "late commit"]);
      await writer.query("COMMIT");
      const after = await page(secret, cursor);
      expect(after.map((r) => r.id)).toEqual([late, later]);
    } finally {
      await writer.end();
    }
  });

  it("an open write transaction of organization A delays A's newest rows and not B's", async () => {
    const a = await e2e.newOrganization();
    const b = await e2e.newOrganization();
    // Declared the way exportctl apply and the demo loaders declare it (docs/export.md).
    const writer = await writerSession(declaredWriterApplicationName("bulk-import", a.organizationId));
    const [aLate, aNewest, bNewest] = [randomUUID(), randomUUID(), randomUUID()];
    try {
      await writer.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'A, long import')", [a.organizationId, randomUUID()]);
      await e2e.pool.query(insert("clock_timestamp()"), [a.organizationId, aNewest, "A, committed meanwhile"]);
      await e2e.pool.query(insert("clock_timestamp()"), [b.organizationId, bNewest, "B, committed meanwhile"]);
      // The case is a 30 s import; the rule does not depend on the duration, so a few
      // seconds of repeated pages show it without slowing the suite.
      for (let i = 0; i < 3; i++) {
        expect((await page(a.secret)).map((r) => r.id)).toEqual([]);
        expect((await page(b.secret)).map((r) => r.id)).toEqual([bNewest]);
        await new Promise((r) => setTimeout(r, 1000));
      }
      // Stamped when the import first wrote, i.e. before A's row committed meanwhile.
      await writer.query(insert("now()"), [a.organizationId, aLate, "A, long import"]);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    expect((await page(a.secret)).map((r) => r.id)).toEqual([aLate, aNewest]);
  });

  it("an undeclared open writer delays every organization's newest rows", async () => {
    const a = await e2e.newOrganization();
    const b = await e2e.newOrganization();
    const writer = await writerSession();
    const [aNewest, bNewest] = [randomUUID(), randomUUID()];
    try {
      await writer.query("SELECT pg_current_xact_id()");
      await e2e.pool.query(insert("clock_timestamp()"), [a.organizationId, aNewest, "A"]);
      await e2e.pool.query(insert("clock_timestamp()"), [b.organizationId, bNewest, "B"]);
      expect(await page(a.secret)).toEqual([]);
      expect(await page(b.secret)).toEqual([]);
      await writer.query("COMMIT");
    } finally {
      await writer.end();
    }
    expect((await page(a.secret)).map((r) => r.id)).toEqual([aNewest]);
    expect((await page(b.secret)).map((r) => r.id)).toEqual([bNewest]);
  });
});
