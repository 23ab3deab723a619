/**
 * No-miss paging: a row whose last_modified was stamped by a transaction still open when a page
 * was served is not skipped by the cursor handed out with that page.
 */
import { randomUUID } from "node:crypto";
import { Client } from "pg";
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

  it("holds back rows behind an open transaction, then serves its late row to the held cursor", async () => {
    const { organizationId, secret } = await e2e.newOrganization();
    const insert = (stamp: string) =>
      `INSERT INTO chemicals (organization_id, id, name, last_modified) VALUES ($1, $2, $3, ${stamp})`;
    const first = randomUUID();
    await e2e.pool.query(insert("clock_timestamp()"), [organizationId, first, "committed before"]);

    // A writer opens its transaction; the row it will write is stamped with the transaction's start
    // (now()), i.e. before rows that other sessions commit meanwhile.
    const writer = new Client({ connectionString: testDatabaseUrl() });
    await writer.connect();
    const late = randomUUID();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT 1");
      // Stamped after the writer's start and committed at once: without a horizon it would be served
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
});
