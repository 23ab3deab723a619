import type { Pool } from "pg";
import { applyPendingChanges, OrganizationRotation, startMaintenanceLoop, type FormField, type RebuildReport } from "../src";
import { createTestOrganization, insertForm, insertSubmission, registryRows, testPool, uuid } from "./support";

/**
 * Schema work is shared fairly between organizations and runs with bounded concurrency (issue 15.3).
 * Every call here is restricted to the test's own organizations (organizationIds): other suites own
 * theirs.
 */
let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(async () => {
  await pool.end();
});

const fields = (): FormField[] => [{ id: uuid(), key: "temperature", label: "Temperature", type: "number" } as FormField];

/** An organization with `forms` published forms: `forms` rebuild requests queued, in publish order. */
async function organizationWithPublishedForms(forms: number): Promise<{ org: string; formIds: string[] }> {
  const org = await createTestOrganization(pool);
  const formIds: string[] = [];
  for (let i = 0; i < forms; i++) formIds.push(await insertForm(pool, org, `Form ${i}`, fields()));
  return { org, formIds };
}

/** Steps as the maintenance loop's workers take them (one rebuild, then one batch), recording rebuilds in order. */
async function stepUntilIdle(orgs: string[], rotation: OrganizationRotation | undefined, batchSize: number) {
  const rebuilds: RebuildReport[] = [];
  const batches: { step: number; consumedBy: string[] }[] = [];
  for (let step = 0; step < 200; step++) {
    const before = await pendingSubmissionChanges(orgs);
    const r = await applyPendingChanges(pool, { organizationIds: orgs, maxRebuilds: 1, batchSize, rotation, onRebuild: (x) => rebuilds.push(x), dropGraceMs: 3_600_000 });
    const after = await pendingSubmissionChanges(orgs);
    batches.push({ step, consumedBy: orgs.filter((o) => (after.get(o) ?? 0) < (before.get(o) ?? 0)) });
    if (r.rebuilds === 0 && r.consumed === 0 && r.deferred === 0) break;
  }
  return { rebuilds, batches };
}

async function pendingSubmissionChanges(orgs: string[]): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ organization_id: string; n: string }>(
    "SELECT organization_id, count(*) AS n FROM form_dataset_changes WHERE kind = 'submission' AND organization_id = ANY($1::uuid[]) GROUP BY 1",
    [orgs],
  );
  return new Map(rows.map((r) => [r.organization_id, Number(r.n)]));
}

describe("fairness between organizations", () => {
  it("a publish of many forms does not hold up another organization's rebuild (round-robin), while oldest-first would", async () => {
    // Oldest-first (no rotation) as the control: the big publish is queued first, so it goes first.
    const fifoBig = await organizationWithPublishedForms(8);
    const fifoSmall = await organizationWithPublishedForms(1);
    const fifo = await stepUntilIdle([fifoBig.org, fifoSmall.org], undefined, 50);
    expect(fifo.rebuilds.map((r) => r.organizationId).indexOf(fifoSmall.org)).toBe(8);

    const big = await organizationWithPublishedForms(8);
    const small = await organizationWithPublishedForms(1);
    const fair = await stepUntilIdle([big.org, small.org], new OrganizationRotation(), 50);
    const order = fair.rebuilds.map((r) => r.organizationId);
    expect(order).toHaveLength(9);
    expect(fair.rebuilds.every((r) => r.status === "built")).toBe(true);
    // Each organization gets one turn before either gets a second one.
    expect(order.indexOf(small.org)).toBeLessThan(2);
    expect((await registryRows(pool, small.org)).length).toBeGreaterThan(0);
  });

  it("a bulk of one organization's submission changes does not hold up another's", async () => {
    const bulk = await organizationWithPublishedForms(1);
    const other = await organizationWithPublishedForms(1);
    const rotation = new OrganizationRotation();
    await stepUntilIdle([bulk.org, other.org], rotation, 5); // both forms built, logs empty
    for (let i = 0; i < 30; i++) await insertSubmission(pool, bulk.org, bulk.formIds[0], { values: { temperature: i } });
    await insertSubmission(pool, other.org, other.formIds[0], { values: { temperature: 1 } });

    const fair = await stepUntilIdle([bulk.org, other.org], rotation, 5);
    const firstForOther = fair.batches.findIndex((b) => b.consumedBy.includes(other.org));
    const bulkBatches = fair.batches.filter((b) => b.consumedBy.includes(bulk.org)).length;
    expect(bulkBatches).toBe(6); // 30 changes in batches of 5: each batch holds one organization's changes
    expect(firstForOther).toBeGreaterThanOrEqual(0);
    expect(firstForOther).toBeLessThan(2);
    expect(fair.batches.every((b) => b.consumedBy.length <= 1)).toBe(true);
  });
});

describe("bounded concurrency", () => {
  it("the maintenance loop works on at most `concurrency` organizations at once, and on several", async () => {
    const orgs = await Promise.all(Array.from({ length: 6 }, () => organizationWithPublishedForms(2)));
    const ids = orgs.map((o) => o.org);
    let inUse = 0;
    let maxInUse = 0;
    pool.on("acquire", () => {
      inUse += 1;
      maxInUse = Math.max(maxInUse, inUse);
    });
    pool.on("release", () => {
      inUse -= 1;
    });
    const concurrency = 2;
    const built = new Set<string>();
    let done!: () => void;
    const allBuilt = new Promise<void>((resolve) => (done = resolve));
    const loop = startMaintenanceLoop(pool, {
      organizationIds: ids,
      concurrency,
      rebuildParallelism: 1,
      pollIntervalMs: 200,
      dropGraceMs: 3_600_000,
      onRebuild: (r) => {
        if (r.status === "built") built.add(`${r.organizationId}/${r.formId}`);
        if (built.size === 12) done();
      },
    });
    try {
      await allBuilt;
    } finally {
      await loop.stop();
      pool.removeAllListeners("acquire");
      pool.removeAllListeners("release");
    }
    // The pool has 4 connections: the LISTEN connection plus one per worker are ever checked out.
    expect(maxInUse).toBeLessThanOrEqual(concurrency + 1);
    expect(maxInUse).toBeGreaterThanOrEqual(concurrency);
    for (const id of ids) expect((await registryRows(pool, id)).length).toBe(2);
  }, 60_000);
});
