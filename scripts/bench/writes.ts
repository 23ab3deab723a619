import type { Pool } from "pg";
import { loadRegistryEntry, loadRenderedPlan } from "@exportsvc/datasets";
import { createPool } from "@exportsvc/db";

/** What a constant writer did, and how a rendered dataset's table stood while it wrote. */
export interface WritesOutcome {
  writes: number;
  seconds: number;
  /** Median and p99 of one write's commit, in ms (the writer's own cost: no trigger or render step is added to it). */
  commitMs: { p50: number; p99: number };
  /** Shares of the samples (every 100 ms) in which the dataset's rendered table was current / patchable only / neither. */
  table: { current: number; patchable: number; live: number };
}

const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

/**
 * Updates random suppliers of the organization, one row a transaction (a new description and
 * `last_modified = clock_timestamp()`, as an integration's edits do), at `perSecond` writes a second
 * over `connections` connections, while sampling the rendered state of `datasetKey`, until stopped.
 */
export async function startSupplierWrites(
  pool: Pool,
  databaseUrl: string,
  organizationId: string,
  datasetKey: string,
  perSecond: number,
  connections = 4,
): Promise<{ stop(): Promise<WritesOutcome> }> {
  const ids = (await pool.query<{ id: string }>("SELECT id FROM suppliers WHERE organization_id = $1", [organizationId])).rows.map((r) => r.id);
  const writers = createPool({ connectionString: databaseUrl, max: connections, applicationName: "bench-writer" });
  const entry = await loadRegistryEntry(pool, organizationId, datasetKey);
  if (!entry) throw new Error(`${datasetKey} is not in the registry`);
  let stopped = false;
  const commits: number[] = [];
  const samples = { current: 0, patchable: 0, live: 0 };
  const started = Date.now();
  const interval = (1000 * connections) / perSecond;
  const writer = async (lane: number) => {
    for (let n = 0; !stopped; n++) {
      const due = started + lane * (interval / connections) + n * interval;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      if (stopped) return;
      const t0 = process.hrtime.bigint();
      await writers.query("UPDATE suppliers SET description = $3, last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $2", [
        organizationId,
        ids[Math.floor(Math.random() * ids.length)],
        `edited ${n}`,
      ]);
      commits.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  };
  const sampler = async () => {
    while (!stopped) {
      const plan = await loadRenderedPlan(pool, organizationId, entry);
      samples[plan?.current ? "current" : plan?.patchable ? "patchable" : "live"]++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const running = Promise.all([...Array.from({ length: connections }, (_, lane) => writer(lane)), sampler()]);
  return {
    async stop() {
      stopped = true;
      await running;
      await writers.end();
      const sorted = [...commits].sort((a, b) => a - b);
      const total = samples.current + samples.patchable + samples.live || 1;
      return {
        writes: commits.length,
        seconds: (Date.now() - started) / 1000,
        commitMs: { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) },
        table: { current: samples.current / total, patchable: samples.patchable / total, live: samples.live / total },
      };
    },
  };
}
