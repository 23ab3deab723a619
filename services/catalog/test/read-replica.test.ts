/**
 * Issue 15 item 4: the listing's registry reads on a hot standby (DATABASE_READ_URL), with a real
 * primary and streaming standby. The listing must stay read-your-writes (it waits for the standby to
 * replay up to the primary's position), fall back to the primary past the bound (and count it in
 * export_replica_fallbacks_total), and keep the horizon's held/settled tokens right for a
 * late-committing transaction on the primary.
 */
import { Client, type Pool } from "pg";
import { ServiceMetrics } from "@exportsvc/common";
import { hotStandbyAvailable, startHotStandby, type HotStandby } from "../../../test/support/hot-standby";
import { createTestOrganization } from "../../../test/support/db";
import { listDatasets, type ListDatasetsDeps } from "../src/handlers/list-datasets";
import { entriesOf, insertFormDataset } from "./support";

(hotStandbyAvailable ? describe : describe.skip)("ListDatasets with a hot standby (real primary + standby)", () => {
  let hs: HotStandby;
  let standbyQueries = 0;
  let metrics: ServiceMetrics;
  const deps = (maxWaitMs: number): ListDatasetsDeps => ({
    pool: hs.primary,
    syncRegistry: async () => undefined,
    readReplica: {
      pool: { query: (...args: unknown[]) => ((standbyQueries += 1), (hs.standby.query as (...a: unknown[]) => unknown)(...args)) } as unknown as Pool,
      maxWaitMs,
    },
    metrics,
  });
  const fallbacks = async () => {
    const text = await metrics.registry.getSingleMetricAsString("export_replica_fallbacks_total");
    return Number(/export_replica_fallbacks_total\{reads="listing"\} (\d+)/.exec(text)?.[1] ?? "NaN");
  };

  beforeAll(async () => {
    hs = await startHotStandby("catalog");
    metrics = new ServiceMetrics({ defaultMetrics: false });
    metrics.exposeReplicaFallbacks("listing");
  }, 120_000);
  afterAll(async () => {
    await hs?.stop();
  });

  it("reads the registry on the standby once it has replayed up to now (read-your-writes)", async () => {
    const org = await createTestOrganization(hs.primary);
    await insertFormDataset(hs.primary, org, { key: "audit", kind: "submission", displayName: "Audit" });
    standbyQueries = 0;
    const listing = await listDatasets(deps(30_000), org);
    expect(entriesOf(listing).map((d) => d.key)).toEqual(["audit"]);
    expect(standbyQueries).toBeGreaterThanOrEqual(3); // replay probe, version, registry
    // A dataset added a moment ago on the primary is listed at once.
    await insertFormDataset(hs.primary, org, { key: "batch", kind: "submission", displayName: "Batch" });
    expect(entriesOf(await listDatasets(deps(30_000), org)).map((d) => d.key)).toEqual(["audit", "batch"]);
    expect(await fallbacks()).toBe(0);
  });

  it("reads the primary when the standby lags past the bound, and counts it", async () => {
    const org = await createTestOrganization(hs.primary);
    await insertFormDataset(hs.primary, org, { key: "audit", kind: "submission", displayName: "Audit" });
    const held = await hs.standby.connect();
    try {
      await held.query("SELECT pg_wal_replay_pause()");
      await insertFormDataset(hs.primary, org, { key: "batch", kind: "submission", displayName: "Batch" });
      const before = await fallbacks();
      const listing = await listDatasets(deps(300), org);
      expect(entriesOf(listing).map((d) => d.key)).toEqual(["audit", "batch"]);
      expect(await fallbacks()).toBe(before + 1);
    } finally {
      await held.query("SELECT pg_wal_replay_resume()").catch(() => undefined);
      held.release();
    }
    await hs.caughtUp();
    const before = await fallbacks();
    await listDatasets(deps(30_000), org);
    expect(await fallbacks()).toBe(before);
  });

  it("holds a token for a late-committing transaction on the primary and moves it when it commits", async () => {
    const org = await createTestOrganization(hs.primary);
    const count = () =>
      hs.primary.query(
        "INSERT INTO dataset_changes AS c (organization_id, dataset, version) VALUES ($1, 'audit', 1) ON CONFLICT (organization_id, dataset) DO UPDATE SET version = c.version + 1, settles_at = clock_timestamp()",
        [org],
      );
    await insertFormDataset(hs.primary, org, { key: "audit", kind: "submission", displayName: "Audit" });
    await count();
    const token = (l: { pieces: readonly Buffer[] }) => entriesOf(l).find((d) => d.key === "audit")?.changeToken;
    const first = await listDatasets(deps(30_000), org);
    const writer = new Client({ connectionString: hs.primaryUrl, application_name: "source-system" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_current_xact_id()"); // an open writer on the primary: the standby's session list never shows it
      await count(); // counted while the writer is open: held
      const held = await listDatasets(deps(30_000), org, first.etag);
      expect(held.notModified).toBeFalsy();
      expect(token(held)).not.toBe(token(first));
      await writer.query("INSERT INTO dataset_changes (organization_id, dataset, version) VALUES ($1, 'late', 1)", [org]);
      await writer.query("COMMIT");
      const settled = await listDatasets(deps(30_000), org, held.etag);
      expect(settled.notModified).toBeFalsy();
      expect(new Set([token(first), token(held), token(settled)]).size).toBe(3);
      expect((await listDatasets(deps(30_000), org, settled.etag)).notModified).toBe(true);
    } finally {
      await writer.end();
    }
  });
});
