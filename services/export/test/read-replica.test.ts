/**
 * Issue 18, item 4: paging from a hot standby (DATABASE_READ_URL). A real primary and a real streaming hot standby
 * (PostgreSQL 15 binaries, private ports, temporary directories), because the point is what a
 * standby's pg_stat_activity and snapshots show. A late commit on the primary must not be skipped by
 * a cursor paging on the standby, and a lagging standby must not serve a page before it has replayed
 * what the horizon relies on.
 */
import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { hotStandbyAvailable, startHotStandby, type HotStandby } from "../../../test/support/hot-standby";
import { buildPageQuery, CursorCodec, CursorKeyring, formIdOfDataset, pageHorizon, ReplicaBehindError, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { visibilityHorizon } from "../src/visibility";
import { ExportMetrics } from "../src/metrics";

const codec = new CursorCodec({ keyring: CursorKeyring.parse("1:0123456789abcdef") });
const SUPPLIERS: PageDataset = {
  key: "resources_suppliers",
  kind: "resource",
  sourceRef: "suppliers",
  columns: [
    { key: "id", dataType: "uuid", source: { kind: "core", name: "id" } },
    { key: "name", dataType: "text", source: { kind: "core", name: "name" } },
  ],
};

(hotStandbyAvailable ? describe : describe.skip)("visibility horizon with a hot standby (real primary + standby)", () => {
  let servers: HotStandby;
  let primaryUrl = "";
  let primary: Pool;
  let standby: Pool;

  beforeAll(async () => {
    servers = await startHotStandby("exportsvc-export");
    ({ primaryUrl, primary, standby } = servers);
  }, 120_000);

  afterAll(async () => {
    await servers?.stop();
  });

  async function organization(): Promise<string> {
    const org = randomUUID();
    await primary.query("INSERT INTO organizations (id, name) VALUES ($1, 'replica test')", [org]);
    return org;
  }

  /** One page read on the standby, with the horizon computed for it; returns ids and the next cursor position. */
  async function standbyPage(org: string, after?: CursorPosition) {
    const horizon = await pageHorizon(primary, org, null, { replica: standby, maxWaitMs: 30_000 });
    const sql = buildPageQuery(SUPPLIERS, { organizationId: org, limit: 5000, after, visibleBeforeMicros: horizon.visibleBeforeMicros }, codec);
    const ids = (await standby.query<{ id: string }>(sql)).rows.map((r) => r.id);
    let next = after;
    if (ids.length > 0) {
      const last = ids[ids.length - 1];
      const { rows } = await standby.query<{ t: string }>("SELECT (extract(epoch FROM last_modified) * 1000000)::bigint::text AS t FROM suppliers WHERE id = $1", [last]);
      next = { lastModifiedMicros: BigInt(rows[0].t), id: last, rowIndex: 0 };
    }
    return { ids, next, horizon };
  }

  it("a late commit on the primary is not skipped by a cursor paging on the standby", async () => {
    const org = await organization();
    const first = randomUUID();
    await primary.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'first')", [org, first]);

    const writer = new Client({ connectionString: primaryUrl, application_name: "source-system" });
    await writer.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("INSERT INTO chemicals (organization_id, id, name) VALUES ($1, $2, 'same transaction')", [org, randomUUID()]);
      const writerStart = BigInt((await writer.query<{ t: string }>("SELECT (extract(epoch FROM now()) * 1000000)::bigint::text AS t")).rows[0].t);
      const later = randomUUID();
      await primary.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'later')", [org, later]);

      // The standby's own session list does not show the primary's writer: a horizon computed there
      // would pass it (this is why the session part is always computed on the primary).
      expect((await pageHorizon(standby, org, null)).visibleBeforeMicros).toBeGreaterThan(writerStart);

      const before = await standbyPage(org);
      expect(before.horizon.visibleBeforeMicros).toBeLessThanOrEqual(writerStart);
      expect(before.ids).toEqual([first]);

      const late = randomUUID();
      await writer.query("INSERT INTO suppliers (organization_id, id, name, last_modified) VALUES ($1, $2, 'late', now())", [org, late]);
      await writer.query("COMMIT");
      const after = await standbyPage(org, before.next);
      expect(after.ids).toEqual([late, later]);
    } finally {
      await writer.end();
    }
  });

  it("waits for a lagging standby to replay what the horizon relies on, and refuses past maxWaitMs", async () => {
    const org = await organization();
    const held = await standby.connect();
    try {
      await held.query("SELECT pg_wal_replay_pause()");
      const row = randomUUID();
      await primary.query("INSERT INTO suppliers (organization_id, id, name) VALUES ($1, $2, 'committed while the standby lags')", [org, row]);
      // The primary's horizon is past the row, but the standby has not replayed it: no page now.
      await expect(pageHorizon(primary, org, null, { replica: standby, maxWaitMs: 300 })).rejects.toBeInstanceOf(ReplicaBehindError);
      // The export service then reads that page from the primary instead (DATABASE_READ_URL fallback).
      const metrics = new ExportMetrics({ defaultMetrics: false });
      const fallback = await visibilityHorizon(primary, org, formIdOfDataset(SUPPLIERS), { readReplica: { pool: standby, maxWaitMs: 300 }, metrics });
      expect(fallback.source).toBe(primary);
      expect(await metrics.registry.getSingleMetricAsString("export_replica_fallbacks_total")).toContain('export_replica_fallbacks_total{reads="page"} 1');
      const fromPrimary = buildPageQuery(SUPPLIERS, { organizationId: org, limit: 5000, visibleBeforeMicros: fallback.visibleBeforeMicros }, codec);
      expect((await primary.query<{ id: string }>(fromPrimary)).rows.map((r) => r.id)).toEqual([row]);
      await held.query("SELECT pg_wal_replay_resume()");
      const page = await standbyPage(org);
      expect(page.ids).toEqual([row]);
      const caughtUp = await visibilityHorizon(primary, org, formIdOfDataset(SUPPLIERS), { readReplica: { pool: standby, maxWaitMs: 30_000 } });
      expect(caughtUp.source).toBe(standby);
    } finally {
      await held.query("SELECT pg_wal_replay_resume()").catch(() => undefined);
      held.release();
    }
  });
});
