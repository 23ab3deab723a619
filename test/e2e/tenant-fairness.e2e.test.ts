/**
 * Issue 12, item 1: one organization's slow readers must not block another organization's exports.
 * The four services run as processes; two organizations each hold 5 CSV streams of ~40 MB pages
 * that they never read. A third organization's pages must still be served, and a stream that makes
 * no progress for STREAM_STALL_TIMEOUT_MS must be aborted, freeing its slot and its connection.
 */
import { startE2E, type E2E } from "../support/fixture";
import { parseCsvPage } from "../support/csv";
import { openStalledReaders, runningCopies, seedLargeSuppliers, waitUntil, type StalledReaders } from "../../scripts/lib/stalled-readers";

const PAGE = "/v1/datasets/resources_suppliers/csv?limit=5000";

async function pageAll(e2e: E2E, secret: string, limit: number): Promise<number> {
  let rows = 0;
  let cursor: string | undefined;
  for (;;) {
    const qs = new URLSearchParams({ limit: String(limit) });
    if (cursor) qs.set("cursor", cursor);
    const res = await fetch(`${e2e.baseUrl}/v1/datasets/resources_suppliers/csv?${qs}`, { headers: { Authorization: `Bearer ${secret}` } });
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) throw new Error(`HTTP ${res.status} ${body.toString()}`);
    const page = parseCsvPage(body);
    rows += page.rows.length;
    if (page.rows.length < limit) return rows;
    cursor = page.rows[page.rows.length - 1]._cursor;
  }
}

/** One small page (the first call of an organization also syncs its dataset registry). */
async function firstRows(e2e: E2E, secret: string): Promise<number> {
  const res = await fetch(`${e2e.baseUrl}/v1/datasets/resources_suppliers/csv?limit=2`, { headers: { Authorization: `Bearer ${secret}` } });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`HTTP ${res.status} ${body.toString()}`);
  return parseCsvPage(body).rows.length;
}

describe("slow readers of two organizations, a third organization exporting", () => {
  let e2e: E2E;
  const readers: StalledReaders[] = [];
  beforeAll(async () => {
    e2e = await startE2E({
      // Today's pool size; each organization may hold 4 of its 10 connections. No stall timeout
      // within the test's time: only the sharing of connections lets the third organization in.
      serviceEnv: {
        export: { DATABASE_POOL_MAX: "10", DATABASE_CONNECTIONS_PER_ORGANIZATION: "4", STREAM_STALL_TIMEOUT_MS: "600000" },
        gateway: { STREAM_STALL_TIMEOUT_MS: "600000" },
      },
    });
  }, 180_000);
  afterAll(async () => {
    for (const r of readers) r.close();
    await e2e?.stop();
  });

  it("serves the third organization's pages while 10 streams are never read", async () => {
    const [a, b, c] = [await e2e.newOrganization(), await e2e.newOrganization(), await e2e.newOrganization()];
    await seedLargeSuppliers(e2e.pool, a.organizationId, 5000);
    await seedLargeSuppliers(e2e.pool, b.organizationId, 5000);
    await seedLargeSuppliers(e2e.pool, c.organizationId, 300, 256);
    // Registry in place for every organization before the attack (first calls sync it).
    for (const org of [a, b, c]) expect(await firstRows(e2e, org.secret)).toBe(2);

    readers.push(openStalledReaders(e2e.baseUrl, a.secret, 5, PAGE), openStalledReaders(e2e.baseUrl, b.secret, 5, PAGE));
    const held = async () => (await runningCopies(e2e.pool, a.organizationId)) + (await runningCopies(e2e.pool, b.organizationId));
    await waitUntil(async () => (await held()) >= 8, "the stalled pages to hold their connections");
    // Let any further stream of theirs reach the database if it is going to.
    await new Promise((r) => setTimeout(r, 1500));

    // The third organization pages to the end, several times, with small and full pages (before the
    // fix: 503 DATABASE_UNAVAILABLE after the pool's 5 s connection timeout).
    for (const limit of [100, 5000, 100]) expect(await pageAll(e2e, c.secret, limit)).toBe(300);
    const listing = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${c.secret}` } });
    expect(listing.status).toBe(200);
    await listing.arrayBuffer();
    // Each attacking organization holds its share (4), not more; its fifth page waits for one of its own.
    expect(await runningCopies(e2e.pool, a.organizationId)).toBe(4);
    expect(await runningCopies(e2e.pool, b.organizationId)).toBe(4);

    // The stalled streams are still there (nothing was aborted: the third organization did not need it).
    expect(await held()).toBe(8);
    for (const r of readers.splice(0)) r.close();
    await waitUntil(async () => (await held()) === 0, "the abandoned pages to end");
  }, 240_000);
});

describe("a stream that makes no progress", () => {
  let e2e: E2E;
  let readers: StalledReaders | undefined;
  beforeAll(async () => {
    // The gateway's timeout acts here (the export service's own is tested in
    // services/export/test/stall-and-shares.test.ts): its abort must reach the database too.
    e2e = await startE2E({ serviceEnv: { gateway: { STREAM_STALL_TIMEOUT_MS: "2000" }, export: { STREAM_STALL_TIMEOUT_MS: "600000" } } });
  }, 180_000);
  afterAll(async () => {
    readers?.close();
    await e2e?.stop();
  });

  it("is aborted after STREAM_STALL_TIMEOUT_MS, freeing its concurrency slot and its database connection", async () => {
    const org = await e2e.newOrganization();
    await seedLargeSuppliers(e2e.pool, org.organizationId, 5000);
    expect(await firstRows(e2e, org.secret)).toBe(2);

    readers = openStalledReaders(e2e.baseUrl, org.secret, 5, PAGE);
    const stallsLogged = () => e2e.stack.logs.gateway.join("").split("accepted no bytes for the stall timeout").length - 1;
    await waitUntil(async () => (await runningCopies(e2e.pool, org.organizationId)) > 0, "the stalled pages to start");
    // The streams never progress: each is aborted by the gateway, and its query is gone from the database.
    await waitUntil(async () => stallsLogged() >= 5, "the 5 stalled pages to be aborted", 60_000);
    await waitUntil(async () => (await runningCopies(e2e.pool, org.organizationId)) === 0, "the aborted pages' queries to end", 30_000);
    // Their slots are free: 5 concurrent requests of the same organization are all served. (A lease
    // release travels to Redis asynchronously, so a 429 right after the abort is tried again shortly;
    // a slot that is never freed fails every attempt.)
    const fiveAtOnce = () =>
      Promise.all(
        Array.from({ length: 5 }, async () => {
          const res = await fetch(`${e2e.baseUrl}/v1/datasets/resources_suppliers/csv?limit=10`, { headers: { Authorization: `Bearer ${org.secret}` } });
          await res.arrayBuffer();
          return res.status;
        }),
      );
    let pages = await fiveAtOnce();
    for (let attempt = 0; attempt < 10 && pages.includes(429); attempt++) {
      await new Promise((r) => setTimeout(r, 500));
      pages = await fiveAtOnce();
    }
    expect(pages).toEqual([200, 200, 200, 200, 200]);
  }, 180_000);
});
