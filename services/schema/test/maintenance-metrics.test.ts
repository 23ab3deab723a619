import type { Pool } from "pg";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { insertForm, insertSite, insertSubmission, publish } from "../../../packages/form-datasets/test/support";
import { formLockKeys } from "../../../packages/form-datasets/src/sql-helpers";
import { rebuildOutcome } from "../src/server";
import { eventually, startSchemaService } from "./support";

/**
 * The rebuild and maintenance-lag metrics that DatasetExportRebuildFailures and
 * DatasetExportMaintenanceLagHigh alert on, recorded by the schema service's own maintenance loop
 * (its real wiring: config, gRPC runtime, /metrics on METRICS_PORT) while forms are applied.
 */
describe("schema service /metrics while form datasets are maintained", () => {
  let pool: Pool;
  beforeAll(() => {
    pool = testPool();
  });
  afterAll(() => pool.end());

  /** One sample's value (undefined when the series is absent). */
  const sample = (text: string, series: string): number | undefined => {
    const line = text.split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };

  it("counts rebuilds by outcome with their durations, and reports the lag of unapplied changes", async () => {
    const org = await createTestOrganization(pool);
    const service = await startSchemaService(
      { FORM_DATASETS_MAINTENANCE: "true", FORM_DATASETS_POLL_MS: "600000", METRICS_PORT: "0" },
      { formMaintenanceOrganizationId: org },
    );
    const scrape = async () => (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text();
    const lockHolder = await pool.connect();
    try {
      expect(service.metricsPort).toBeGreaterThan(0);
      // Every outcome is exposed from the start: the first failure is an increase from 0 the alert can see.
      const initial = await scrape();
      for (const outcome of ["success", "failure", "superseded"]) {
        expect(sample(initial, `dataset_rebuilds_total{outcome="${outcome}"}`)).toBe(0);
        expect(sample(initial, `dataset_rebuild_duration_seconds_count{outcome="${outcome}"}`)).toBe(0);
      }
      const field = (key: string) => ({ id: crypto.randomUUID(), key, label: key, type: "text" as const });
      // Three forms applied: two build, one fails (a submission's site has a blank time zone).
      const zoneless = await insertSite(pool, org, { name: "No Zone" });
      await pool.query("UPDATE sites SET time_zone = '' WHERE id = $1", [zoneless]);
      const broken = await insertForm(pool, org, "Broken Form", null);
      await insertSubmission(pool, org, broken, { siteId: zoneless });
      await publish(pool, org, broken, [field("note")]);
      const inspection = await insertForm(pool, org, "Inspection", [field("note")]);
      await insertForm(pool, org, "Audit", [field("finding")]);

      await eventually("three rebuilds counted", async () => {
        const text = await scrape();
        return (sample(text, 'dataset_rebuilds_total{outcome="success"}') ?? 0) + (sample(text, 'dataset_rebuilds_total{outcome="failure"}') ?? 0) >= 3;
      });
      let text = await scrape();
      expect(sample(text, 'dataset_rebuilds_total{outcome="success"}')).toBe(2);
      expect(sample(text, 'dataset_rebuilds_total{outcome="failure"}')).toBe(1);
      expect(sample(text, 'dataset_rebuild_duration_seconds_count{outcome="success"}')).toBe(2);
      expect(sample(text, 'dataset_rebuild_duration_seconds_count{outcome="failure"}')).toBe(1);
      expect(sample(text, 'dataset_rebuild_duration_seconds_sum{outcome="success"}')).toBeGreaterThan(0);
      await eventually("caught up", async () => sample(await scrape(), "dataset_maintenance_lag_seconds") === 0);

      // A change the loop cannot apply (another worker holds the form) ages in the log: the gauge shows its age.
      await lockHolder.query("BEGIN");
      await lockHolder.query("SELECT pg_advisory_xact_lock($1, $2)", formLockKeys(org, inspection));
      await insertSubmission(pool, org, inspection);
      await pool.query(
        "UPDATE form_dataset_changes SET created_at = clock_timestamp() - interval '15 minutes' WHERE organization_id = $1 AND kind = 'submission'",
        [org],
      );
      await pool.query("NOTIFY form_dataset_changes");
      await eventually("lag of the held change reported", async () => (sample(await scrape(), "dataset_maintenance_lag_seconds") ?? 0) >= 900);

      // Released, the change is applied and the lag falls back to 0.
      await lockHolder.query("COMMIT");
      await pool.query("NOTIFY form_dataset_changes");
      await eventually("lag back to 0", async () => sample(await scrape(), "dataset_maintenance_lag_seconds") === 0);
      text = await scrape();
      expect(sample(text, 'dataset_rebuilds_total{outcome="success"}')).toBe(2);
    } finally {
      await lockHolder.query("ROLLBACK").catch(() => undefined);
      lockHolder.release();
      await service.stop();
    }
  });

  it("maps build statuses to the outcomes the alerts count", () => {
    expect(["built", "failed", "error", "missing", "frozen", "unpublished"].map((s) => rebuildOutcome(s as never))).toEqual([
      "success",
      "failure",
      "failure",
      "superseded",
      "superseded",
      "superseded",
    ]);
  });
});
