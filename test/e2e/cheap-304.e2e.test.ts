/**
 * The cheap 304 answered by the gateway (docs/catalog.md, "A cheap 304"), with real processes: once
 * the catalog has called an organization's ETag settled, a matching If-None-Match gets its 304 from
 * the gateway alone (it still does with the catalog killed), and after a write to the organization
 * the gateway no longer answers on its own (the request goes to the catalog, down here: 503, never
 * a stale 304).
 */
import { randomUUID } from "node:crypto";
import { startE2E, type E2E } from "../support/fixture";

describe("304 decided by the gateway", () => {
  let e2e: E2E;
  let org: { organizationId: string; secret: string };
  beforeAll(async () => {
    e2e = await startE2E();
    org = await e2e.newOrganization();
    await e2e.pool.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'Acme', now() - interval '1 hour')", [
      org.organizationId,
      randomUUID(),
    ]);
  }, 180_000);
  afterAll(() => e2e?.stop());

  const list = (ifNoneMatch?: string) =>
    fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { authorization: `Bearer ${org.secret}`, ...(ifNoneMatch ? { "if-none-match": ifNoneMatch } : {}) } });

  it("answers from the settled version without the catalog, and stops as soon as the organization is written", async () => {
    // Until every token is settled the ETag is a content hash; poll until the catalog itself answers 304.
    let etag = "";
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await list(etag || undefined);
      if (res.status === 304) break;
      expect(res.status).toBe(200);
      etag = res.headers.get("etag")!;
      await res.arrayBuffer();
      if (Date.now() > deadline) throw new Error("the listing never settled");
      await new Promise((r) => setTimeout(r, 200));
    }

    e2e.stack.processes.catalog.kill("SIGKILL");
    await new Promise((r) => e2e.stack.processes.catalog.once("exit", r));
    for (let i = 0; i < 3; i++) {
      const res = await list(etag);
      expect(res.status).toBe(304);
      expect(res.headers.get("etag")).toBe(etag);
    }

    await e2e.pool.query("UPDATE suppliers SET name = 'Acme Ltd' WHERE organization_id = $1", [org.organizationId]);
    const afterWrite = await list(etag);
    expect(afterWrite.status).toBe(503);
    expect(await afterWrite.json()).toMatchObject({ status: 503 });
  }, 60_000);
});
