import { createLogger } from "@exportsvc/common";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { fixedDatasetsSyncer, RegistrySyncWorker, type DatasetSyncer } from "../src";
import { loadSchemaConfig } from "../src/config";

/** REGISTRY_SYNC_CONCURRENCY: the queue worker syncs several organizations at once, never more than configured (issue 15.3). */
describe("registry sync queue worker concurrency", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("syncs at most `concurrency` organizations at once, and that many", async () => {
    const orgs = await Promise.all(Array.from({ length: 6 }, () => createTestOrganization(pool)));
    const mine = new Set(orgs);
    let inFlight = 0;
    let maxInFlight = 0;
    const synced = new Set<string>();
    // Our organizations' syncs hold their turn until two have run at once (waiting for that, however
    // long the worker takes to start the second), so the bound is what is observed; other suites'
    // organizations sync as the service would.
    const syncer: DatasetSyncer = {
      name: "counting",
      sync: async (client, organizationId) => {
        if (!mine.has(organizationId)) return fixedDatasetsSyncer.sync(client, organizationId);
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        for (let i = 0; i < 1000 && maxInFlight < 2; i++) await new Promise((r) => setTimeout(r, 20));
        await new Promise((r) => setTimeout(r, 50));
        inFlight -= 1;
        synced.add(organizationId);
        return 0;
      },
    };
    // Queued before the worker starts, in one statement (the set-up trigger queued them already; refresh).
    await pool.query("INSERT INTO registry_sync_queue (organization_id) SELECT unnest($1::uuid[]) ON CONFLICT DO NOTHING", [orgs]);
    const worker = new RegistrySyncWorker({ pool, databaseUrl: testDatabaseUrl(), syncers: [syncer], pollMs: 100, log: createLogger("test", "silent"), concurrency: 2 });
    worker.start();
    try {
      for (let i = 0; i < 800 && synced.size < orgs.length; i++) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await worker.stop();
    }
    expect(synced.size).toBe(orgs.length);
    expect(maxInFlight).toBe(2);
  }, 60_000);

  it("refuses more workers than pool connections at start-up, naming the variable", () => {
    const env = { DATABASE_URL: "postgres://x@localhost/db", DATABASE_POOL_MAX: "3" };
    expect(() => loadSchemaConfig({ ...env, REGISTRY_SYNC_CONCURRENCY: "4" })).toThrow(/REGISTRY_SYNC_CONCURRENCY/);
    expect(() => loadSchemaConfig({ ...env, FORM_MAINTENANCE_CONCURRENCY: "3" })).toThrow(/FORM_MAINTENANCE_CONCURRENCY/);
    expect(() => loadSchemaConfig({ ...env, FORM_MAINTENANCE_CONCURRENCY: "0" })).toThrow(/FORM_MAINTENANCE_CONCURRENCY/);
    expect(loadSchemaConfig({ ...env, FORM_MAINTENANCE_CONCURRENCY: "2", REGISTRY_SYNC_CONCURRENCY: "3" })).toMatchObject({
      FORM_MAINTENANCE_CONCURRENCY: 2,
      REGISTRY_SYNC_CONCURRENCY: 3,
    });
  });
});
