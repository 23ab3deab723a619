/**
 * SiteCounts: the organizations' site counts that choose how submission pages read site names. A
 * page never waits for a count: it is read in the background, kept for the TTL, then read again.
 */
import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { SiteCounts } from "../src/site-counts";

let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(() => pool.end());

const addSites = (organizationId: string, n: number) =>
  pool.query("INSERT INTO sites (organization_id, id, name) SELECT $1, gen_random_uuid(), 'Site ' || g FROM generate_series(1, $2::int) g", [organizationId, n]);

describe("SiteCounts", () => {
  it("answers undefined until the background read lands, then the count until the TTL passes, then reads again", async () => {
    const org = await createTestOrganization(pool);
    await addSites(org, 2);
    let now = 1_000;
    const counts = new SiteCounts(pool, { ttlMs: 60_000, maxOrganizations: 10, now: () => now });

    expect(counts.get(org)).toBeUndefined();
    await counts.settled();
    expect(counts.get(org)).toBe(2);

    await addSites(org, 3);
    now += 59_999;
    expect(counts.get(org)).toBe(2); // within the TTL: no read
    await counts.settled();
    expect(counts.get(org)).toBe(2);

    now += 1;
    expect(counts.get(org)).toBe(2); // expired: the stale count still answers while it is read again
    await counts.settled();
    expect(counts.get(org)).toBe(5);
  });

  it("counts only the organization's own sites and forgets the least recently read beyond maxOrganizations", async () => {
    const [a, b] = [await createTestOrganization(pool), await createTestOrganization(pool)];
    await addSites(a, 1);
    const counts = new SiteCounts(pool, { ttlMs: 60_000, maxOrganizations: 1 });
    counts.get(a);
    await counts.settled();
    expect(counts.get(a)).toBe(1);
    expect(counts.get(b)).toBeUndefined();
    await counts.settled();
    expect(counts.get(b)).toBe(0);
    expect(counts.get(a)).toBeUndefined(); // forgotten for b; read again
    await counts.settled();
    expect(counts.get(a)).toBe(1);
  });

  it("one read per organization at a time; a failing read leaves the count unknown and throws nowhere", async () => {
    let queries = 0;
    let fail: (err: Error) => void = () => undefined;
    const failing = {
      query: () => {
        queries++;
        return new Promise((_resolve, reject) => (fail = reject));
      },
    } as unknown as Pool;
    const debug = jest.fn();
    const counts = new SiteCounts(failing, { ttlMs: 60_000, maxOrganizations: 10, logger: { debug } as never });
    const org = randomUUID();
    expect(counts.get(org)).toBeUndefined();
    expect(counts.get(org)).toBeUndefined();
    expect(queries).toBe(1);
    fail(new Error("database down"));
    await counts.settled();
    expect(debug).toHaveBeenCalledWith(expect.objectContaining({ organizationId: org, err: "database down" }), expect.any(String));
    expect(counts.get(org)).toBeUndefined();
    expect(queries).toBe(2);
  });
});
