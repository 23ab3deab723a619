import { Counter, Gauge, Histogram, ServiceMetrics, type MetricsOptions } from "@exportsvc/common";

export const REBUILD_OUTCOMES = ["success", "failure", "superseded"] as const;
export type RebuildOutcome = (typeof REBUILD_OUTCOMES)[number];

/** Form dataset rebuilds: small forms in well under a second, the largest in tens of minutes. */
const REBUILD_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** The schema service's metric families (form dataset maintenance), beside the shared ones. */
export class SchemaMetrics extends ServiceMetrics {
  readonly rebuildDuration: Histogram<"outcome">;
  readonly rebuilds: Counter<"outcome">;
  readonly maintenanceLag: Gauge;

  constructor(options: MetricsOptions = {}) {
    super(options);
    const registers = [this.registry];
    this.rebuildDuration = new Histogram({
      name: "dataset_rebuild_duration_seconds",
      help: "Duration of form dataset rebuilds (new table written and swapped in), by outcome.",
      labelNames: ["outcome"],
      buckets: REBUILD_BUCKETS,
      registers,
    });
    this.rebuilds = new Counter({
      name: "dataset_rebuilds_total",
      help: "Form dataset rebuilds finished, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.maintenanceLag = new Gauge({
      name: "dataset_maintenance_lag_seconds",
      help: "Age of the oldest source change not yet applied to the materialized form datasets (0 when caught up).",
      registers,
    });
    this.maintenanceLag.set(0);
  }

  /**
   * Exposes every rebuild outcome at 0 before the first rebuild, in the service that runs them: a
   * counter series born at 1 shows no increase(), so the first failure would never alert.
   */
  initRebuildSeries(): void {
    for (const outcome of REBUILD_OUTCOMES) {
      this.rebuilds.inc({ outcome }, 0);
      this.rebuildDuration.zero({ outcome });
    }
  }

  observeRebuild(outcome: RebuildOutcome, durationSeconds: number): void {
    this.rebuilds.inc({ outcome });
    this.rebuildDuration.observe({ outcome }, durationSeconds);
  }

  setMaintenanceLag(seconds: number): void {
    this.maintenanceLag.set(Math.max(0, seconds));
  }
}
