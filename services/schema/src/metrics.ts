import { ServiceMetrics, type MetricsOptions } from "@exportsvc/common";
import { RENDER_OUTCOMES, type RenderOutcome } from "./maintenance/rendered-datasets";

export const REBUILD_OUTCOMES = ["success", "failure", "superseded"] as const;
export type RebuildOutcome = (typeof REBUILD_OUTCOMES)[number];

/** Form dataset rebuilds: small forms in well under a second, the largest in tens of minutes. */
const REBUILD_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** The schema service's metric families (form dataset maintenance), beside the shared ones. */
export class SchemaMetrics extends ServiceMetrics {
  readonly rebuildDuration = this.histogram("dataset_rebuild_duration_seconds", "Duration of form dataset rebuilds (new table written and swapped in), by outcome.", ["outcome"], REBUILD_BUCKETS);
  readonly rebuilds = this.counter("dataset_rebuilds_total", "Form dataset rebuilds finished, by outcome.", ["outcome"]);
  readonly renders = this.counter("rendered_dataset_renders_total", "Renders of resource datasets and deviations into their tables, by outcome: built (a new table), updated (changed rows rendered again), current, small (too few rows: read live), removed, busy (another replica on it), error (pages read live until a later render succeeds).", ["outcome"]);
  readonly renderDuration = this.histogram("rendered_dataset_render_duration_seconds", "Duration of renders of resource datasets and deviations, by outcome.", ["outcome"], REBUILD_BUCKETS);
  readonly maintenanceLag = this.gauge("dataset_maintenance_lag_seconds", "Age of the oldest source change not yet applied to the materialized form datasets (0 when caught up).");

  constructor(options: MetricsOptions = {}) {
    super(options);
    this.maintenanceLag.set(0);
    for (const outcome of RENDER_OUTCOMES) this.renders.inc({ outcome }, 0);
  }

  observeRender(outcome: RenderOutcome, durationSeconds: number): void {
    this.renders.inc({ outcome });
    this.renderDuration.observe({ outcome }, durationSeconds);
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
