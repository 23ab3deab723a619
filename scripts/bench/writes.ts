import type { Pool } from "pg";
import { loadRegistryEntry, loadRenderedPlan } from "@exportsvc/datasets";
import { createPool } from "@exportsvc/db";
import { percentile } from "../soak/http-latency";

/** What a constant writer did, and how a rendered dataset's table stood while it wrote. */
export interface WritesOutcome {
  writes: number;
  seconds: number;
  /** Median and p99 of one write's commit, in ms (the writer's own cost: no trigger or render step is added to it). */
  commitMs: { p50: number; p99: number };
  /** Shares of the samples (every 100 ms) in which the dataset's rendered table was current / patchable only / neither. */
  table: { current: number; patchable: number; live: number };
  /** Commit to visibility through the HTTP API, ms (p50, p99, max; probes: how many writes were followed). */
  visibleMs: { probes: number; p50: number; p99: number; max: number };
}

/** Where the commit-to-visibility probe reads: the HTTP API of the stack under test. */
export interface VisibilityProbeTarget {
  baseUrl: string;
  apiKey: string;
}

/**
 * Updates random suppliers of the organization, one row a transaction (a new description and
 * `last_modified = clock_timestamp()`, as an integration's edits do), at `perSecond` writes a second
 * over `connections` connections, while sampling the rendered state of `datasetKey` and following
 * writes through `probe`'s HTTP API until they show (commit to visibility), until stopped.
 */
export async function startSupplierWrites(
  pool: Pool,
  databaseUrl: string,
  organizationId: string,
  datasetKey: string,
  perSecond: number,
  probe: VisibilityProbeTarget,
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
  let latest: { id: string; lastModified: string; committedAt: number } | undefined;
  const visible: number[] = [];
  const writer = async (lane: number) => {
    for (let n = 0; !stopped; n++) {
      const due = started + lane * (interval / connections) + n * interval;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      if (stopped) return;
      const t0 = process.hrtime.bigint();
      const id = ids[Math.floor(Math.random() * ids.length)];
      const { rows } = await writers.query<{ lm: string }>(
        `UPDATE suppliers SET description = $3, last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $2
         RETURNING to_char(last_modified AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS lm`,
        [organizationId, id, `edited ${lane}/${n}`],
      );
      commits.push(Number(process.hrtime.bigint() - t0) / 1e6);
      latest = { id, lastModified: rows[0].lm, committedAt: Date.now() };
    }
  };
  const sampler = async () => {
    while (!stopped) {
      const plan = await loadRenderedPlan(pool, organizationId, entry);
      samples[plan?.current ? "current" : plan?.patchable ? "patchable" : "live"]++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  // Every 250 ms the last committed write is followed: pages from its own position (modifiedSince = its
  // last_modified, after the nil id) until the row shows, as a consumer polling for changes sees it.
  const prober = async () => {
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      const write = latest;
      if (!write) continue;
      const url = new URL(`/v1/datasets/${encodeURIComponent(datasetKey)}/csv`, probe.baseUrl);
      url.searchParams.set("limit", "100");
      url.searchParams.set("modifiedSince", write.lastModified);
      url.searchParams.set("after", "00000000-0000-0000-0000-000000000000");
      for (;;) {
        const res = await fetch(url, { headers: { authorization: `Bearer ${probe.apiKey}` } });
        const body = await res.text();
        if (!res.ok) throw new Error(`visibility probe: HTTP ${res.status}: ${body.slice(0, 300)}`);
        if (body.includes(write.id)) break;
        if (Date.now() - write.committedAt > 30_000) throw new Error(`visibility probe: a write committed 30 s ago is not visible (${write.id})`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      visible.push(Date.now() - write.committedAt);
    }
  };
  const running = Promise.all([...Array.from({ length: connections }, (_, lane) => writer(lane)), sampler(), prober()]);
  return {
    async stop() {
      stopped = true;
      await running;
      await writers.end();
      const at = (values: number[], p: number) => percentile(values, p) ?? 0;
      const total = samples.current + samples.patchable + samples.live || 1;
      return {
        writes: commits.length,
        seconds: (Date.now() - started) / 1000,
        commitMs: { p50: at(commits, 50), p99: at(commits, 99) },
        table: { current: samples.current / total, patchable: samples.patchable / total, live: samples.live / total },
        visibleMs: { probes: visible.length, p50: at(visible, 50), p99: at(visible, 99), max: at(visible, 100) },
      };
    },
  };
}
