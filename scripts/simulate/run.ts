import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "pg";
import { createPool } from "@exportsvc/db";
import type { ServiceName } from "../lib/stack";
import { OrgChurn, runChurn, writeChange, type ChangeKind } from "./churn";
import { createSimOrganization, startCluster, type Cluster } from "./cluster";
import { consumerAvailable, syncOnce, WatchingConsumer, type ConsumerKind } from "./consumer";
import { installLagProbe } from "./lag-probe";
import { FaultInjector, faultSchedule, FAULT_KINDS, type FaultKind, type InjectedFault, type ScheduledFault } from "./faults";
import { plotRun } from "./plot";
import { Random } from "./random";
import { RenderedPagesFollower, type RenderedPageCounts } from "./rendered-pages";
import { failed, lagSummary, orgVerdict, totals, type OrgVerdict, type Totals } from "./verdict";

export interface SimulationOptions {
  seed: number;
  minutes: number;
  rate: number;
  orgs: number;
  faults: boolean;
  faultKinds?: FaultKind[];
  faultGapSeconds: number;
  consumer: ConsumerKind;
  pageLimit: number;
  outDir?: string;
  plot: boolean;
  log?: (line: string) => void;
}

export interface SimulationReport {
  options: Omit<SimulationOptions, "log">;
  startedAt: string;
  durationMs: number;
  generator: { changes: Record<string, number>; documents: number; longTransactions: number; refused: number; refusals: string[]; writeRetries: number };
  faults: InjectedFault[];
  serviceCrashes: { service: string; at: number; exit: string }[];
  consumerRestarts: number;
  counters: Record<string, number>;
  lag: ReturnType<typeof lagSummary>;
  /** The export's pages of resource datasets and deviations by source (table, patched, live), over the run and the final syncs. */
  renderedPages: RenderedPageCounts;
  totals: Totals;
  organizations: OrgVerdict[];
  passed: boolean;
  problems: string[];
}

export const SERVICES: ServiceName[] = ["schema", "catalog", "export", "gateway"];

/** Checks every few seconds that the services are up; one that died on its own is a defect: record it and start it again. */
export function watchdog(cluster: Cluster, busy: () => boolean, crashes: SimulationReport["serviceCrashes"], log: (l: string) => void): () => void {
  let running = true;
  const tick = async () => {
    while (running) {
      await new Promise((r) => setTimeout(r, 2000));
      if (!running || busy()) continue;
      for (const name of SERVICES) {
        const child = cluster.stack.processes[name];
        if (child.exitCode === null && child.signalCode === null) continue;
        if (busy()) break;
        const exit = String(child.exitCode ?? child.signalCode);
        crashes.push({ service: name, at: Date.now(), exit });
        log(`DEFECT? ${name} exited on its own (${exit}): ${cluster.stack.logs[name].join("").slice(-1500)}`);
        await cluster.stack.restart(name).catch((err) => log(`restart of ${name} failed: ${(err as Error).message}`));
      }
    }
  };
  void tick();
  return () => {
    running = false;
  };
}

/**
 * Runs the scheduled faults one at a time, each at its offset from `startedAt`, with `injecting(true)`
 * while one runs (the watchdog leaves a service's exit during a fault alone).
 */
export async function runFaults(injector: FaultInjector, schedule: ScheduledFault[], startedAt: number, shouldStop: () => boolean, injecting: (on: boolean) => void): Promise<void> {
  for (const f of schedule) {
    const wait = startedAt + f.atMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (shouldStop()) return;
    injecting(true);
    try {
      await injector.run([f], startedAt, shouldStop);
    } finally {
      injecting(false);
    }
  }
}

/**
 * Ends the faults (proxy, latency, Redis) and the watchdog, then starts again every service that is
 * down, recording it in `crashes`: the state in which a run's final checks are taken.
 */
export async function restoreComponents(cluster: Cluster, stopWatchdog: () => void, crashes: SimulationReport["serviceCrashes"]): Promise<void> {
  cluster.proxy.restore();
  cluster.proxy.setLatency(0);
  await cluster.startRedis().catch(() => undefined);
  stopWatchdog();
  for (const name of SERVICES) {
    const child = cluster.stack.processes[name];
    if (child.exitCode !== null || child.signalCode !== null) {
      crashes.push({ service: name, at: Date.now(), exit: String(child.exitCode ?? child.signalCode) });
      await cluster.stack.restart(name);
    }
  }
}

export async function waitForFormMaintenance(databaseUrl: string, timeoutMs: number, log: (l: string) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = new Client({ connectionString: databaseUrl });
    try {
      await c.connect();
      const r = await c.query<{ n: string }>("SELECT count(*) AS n FROM form_dataset_changes");
      if (Number(r.rows[0].n) === 0) return;
      if (Date.now() > deadline) {
        log(`form dataset maintenance still has ${r.rows[0].n} changes pending after ${timeoutMs} ms`);
        return;
      }
    } catch {
      // the database is coming back
    } finally {
      await c.end().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Waits until no listed dataset of the organization carries a held token (docs/catalog.md: held
 * while rows it counts are behind the visibility horizon, e.g. a form whose pending floor the
 * maintenance loop raises a poll after its change log drained). Only then is one incremental pass
 * the end of the copy's catch-up: the contract lets a pass under a held token stop short, and the
 * next pass fetch the rest. Returns the keys still held at the deadline (none: settled).
 */
export async function waitForSettledTokens(baseUrl: string, apiKey: string, timeoutMs: number): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let held: string[] | undefined;
    try {
      const res = await fetch(new URL("/v1/datasets", baseUrl), { headers: { authorization: `Bearer ${apiKey}` } });
      if (res.ok) held = ((await res.json()) as { key: string; changeToken: string }[]).filter((d) => d.changeToken.includes("held-before")).map((d) => d.key);
    } catch {
      // the gateway is coming back
    }
    if (held?.length === 0) return [];
    if (Date.now() > deadline) return held ?? ["(listing unavailable)"];
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function simulate(opts: SimulationOptions): Promise<SimulationReport> {
  const t0 = Date.now();
  const log = opts.log ?? ((line: string) => process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${line}\n`));
  const unavailable = consumerAvailable(opts.consumer);
  if (unavailable) throw new Error(unavailable);
  const problems: string[] = [];

  // Every resource dataset and deviations rendered, however small, every 2 s: consumers polling every
  // second read pages from current tables, from tables patched with the rows written since, and live
  // after a rename (report.renderedPages counts each), and the copies must converge all the same. The
  // soak, which measures memory and latency, keeps the production defaults instead.
  const cluster = await startCluster({ log, redis: true, schemaEnv: { RENDERED_DATASETS_MIN_ROWS: "0", RENDERED_DATASETS_INTERVAL_MS: "2000" } });
  const keyHashSecret = (cluster.stack as unknown as { keyHashSecret: string }).keyHashSecret;
  const consumers: WatchingConsumer[] = [];
  let stopWatchdog = () => undefined as void;
  try {
    const sourcePool = createPool({ connectionString: cluster.databaseUrl, max: opts.orgs + 4 });
    const orgs: { id: string; apiKey: string; churn: OrgChurn; copyUrl: string; fullUrl: string }[] = [];
    for (let i = 0; i < opts.orgs; i++) {
      const id = Random.derived(opts.seed, `organization ${i}`).uuid();
      const { apiKey } = await createSimOrganization(cluster.databaseUrl, keyHashSecret, id, `Simulated org ${i + 1}`);
      const churn = new OrgChurn(id, opts.seed);
      const ok = await writeChange(churn, churn.initial(), { pool: sourcePool, ratePerSecond: opts.rate, shouldStop: () => false, log });
      if (!ok) throw new Error(`the initial document of organization ${id} was refused: ${churn.counters.refusals.join("; ")}`);
      const copyUrl = await cluster.createDatabase(`copy_${i}`);
      if (opts.consumer === "sync-client") await installLagProbe(copyUrl);
      orgs.push({ id, apiKey, churn, copyUrl, fullUrl: await cluster.createDatabase(`full_${i}`) });
    }
    log(`${opts.orgs} organization(s) seeded; consumer: ${opts.consumer}${opts.consumer === "minimal" ? " (the simulator's stand-in loader)" : ""}`);

    for (const o of orgs) {
      const c = new WatchingConsumer(opts.consumer, { targetUrl: o.copyUrl, baseUrl: cluster.stack.baseUrl, apiKey: o.apiKey, pageLimit: opts.pageLimit }, log);
      c.start();
      consumers.push(c);
    }

    const renderedPages = new RenderedPagesFollower(cluster.metricsPorts.export);
    renderedPages.start();
    const startedAt = Date.now();
    const runMs = opts.minutes * 60_000;
    let stopping = false;
    const shouldStop = () => stopping || Date.now() - startedAt >= runMs;

    const injector = new FaultInjector(cluster, consumers, log);
    let injecting = false;
    const crashes: SimulationReport["serviceCrashes"] = [];
    stopWatchdog = watchdog(cluster, () => injecting, crashes, log);
    const schedule = opts.faults ? faultSchedule(opts.seed, runMs, opts.faultGapSeconds * 1000, opts.faultKinds ?? FAULT_KINDS) : [];
    if (opts.faults) log(`fault schedule: ${schedule.length} faults (${[...new Set(schedule.map((f) => f.kind))].length} kinds)`);
    const faultRun = runFaults(injector, schedule, startedAt, shouldStop, (on) => (injecting = on));

    const churnRuns = orgs.map((o) => runChurn(o.churn, { pool: sourcePool, ratePerSecond: opts.rate / opts.orgs, shouldStop, log }));
    const progress = setInterval(() => {
      const changes = orgs.reduce((s, o) => s + Object.values(o.churn.counters.changes).reduce((a, b) => a + b, 0), 0);
      log(`progress: ${changes} changes written, ${injector.injected.length} faults injected`);
    }, 15_000);
    await Promise.all(churnRuns);
    stopping = true;
    clearInterval(progress);
    await faultRun;
    log("generator and faults stopped; restoring every component");
    await restoreComponents(cluster, stopWatchdog, crashes);
    await waitForFormMaintenance(cluster.databaseUrl, 120_000, log);
    for (const o of orgs) {
      const held = await waitForSettledTokens(cluster.stack.baseUrl, o.apiKey, 60_000);
      if (held.length > 0) problems.push(`organization ${o.id}: tokens still held 60 s after the source went quiet: ${held.join(", ")}`);
    }
    await sourcePool.end();

    const consumerRestarts = consumers.reduce((s, c) => s + c.restarts, 0);
    const consumerExits = consumers.reduce((s, c) => s + c.unexpectedExits, 0);
    if (consumerExits > 0) problems.push(`the consumer exited ${consumerExits} time(s) on its own (started again each time)`);
    for (const c of consumers) await c.stop();
    log("final incremental sync, then a fresh full export into a second target");
    for (const o of orgs) {
      const target = { baseUrl: cluster.stack.baseUrl, apiKey: o.apiKey, pageLimit: opts.pageLimit };
      const last = await syncOnce(opts.consumer, { ...target, targetUrl: o.copyUrl }, 300_000);
      if (!last.ok) problems.push(`final incremental sync of ${o.id} failed: ${last.output}`);
      const full = await syncOnce(opts.consumer, { ...target, targetUrl: o.fullUrl, pageLimit: 5000 }, 300_000);
      if (!full.ok) problems.push(`full export of ${o.id} failed: ${full.output}`);
    }

    const pagesBySource = await renderedPages.stop();
    log(`pages of resource datasets and deviations (at least): ${Object.entries(pagesBySource).map(([source, n]) => `${source} ${n}`).join(", ")}`);
    const verdicts: OrgVerdict[] = [];
    for (const o of orgs) {
      verdicts.push(await orgVerdict({ sourceUrl: cluster.databaseUrl, copyUrl: o.copyUrl, fullUrl: o.fullUrl, organizationId: o.id, since: new Date(startedAt), layout: opts.consumer }));
    }
    const t = totals(verdicts);
    const counters: Record<string, number> = {};
    for (const v of verdicts) for (const [k, n] of Object.entries(v.counters)) counters[k] = (counters[k] ?? 0) + n;
    for (const c of consumers) for (const [k, n] of Object.entries(c.counters)) counters[k] = (counters[k] ?? 0) + n;
    const generator = { changes: {} as Record<string, number>, documents: 0, longTransactions: 0, refused: 0, refusals: [] as string[], writeRetries: 0 };
    for (const o of orgs) {
      const c = o.churn.counters;
      for (const [k, n] of Object.entries(c.changes)) generator.changes[k as ChangeKind] = (generator.changes[k] ?? 0) + n;
      generator.documents += c.documents;
      generator.longTransactions += c.longTransactions;
      generator.refused += c.refused;
      generator.refusals.push(...c.refusals);
      generator.writeRetries += c.writeRetries;
    }
    if (crashes.length > 0) problems.push(`${crashes.length} service exit(s) that no fault caused: ${crashes.map((c) => `${c.service} (${c.exit})`).join(", ")}`);
    const report: SimulationReport = {
      options: { ...opts, log: undefined } as Omit<SimulationOptions, "log">,
      startedAt: new Date(startedAt).toISOString(),
      durationMs: Date.now() - startedAt,
      generator,
      faults: injector.injected,
      serviceCrashes: crashes,
      consumerRestarts,
      counters,
      lag: lagSummary(verdicts.flatMap((v) => v.lagPoints.map((p) => p.lagMs))),
      renderedPages: pagesBySource,
      totals: t,
      organizations: verdicts,
      passed: !failed(t) && problems.length === 0,
      problems,
    };
    if (opts.outDir) {
      mkdirSync(opts.outDir, { recursive: true });
      writeFileSync(join(opts.outDir, "report.json"), JSON.stringify(report, null, 2));
      if (opts.plot) {
        await plotRun(join(opts.outDir, "lag-and-faults.png"), {
          startedAt,
          lagPoints: verdicts.flatMap((v) => v.lagPoints.map((p) => ({ ...p, org: v.organizationId.slice(0, 8) }))),
          faults: injector.injected,
          title: `seed ${opts.seed}: ${opts.minutes} min, ${opts.rate} changes/s, ${opts.orgs} org(s), ${injector.injected.length} faults`,
        });
      }
    }
    return report;
  } finally {
    stopWatchdog();
    for (const c of consumers) await c.stop().catch(() => undefined);
    await cluster.close();
  }
}

const fmt = (n: number | null) => (n === null ? "-" : n >= 10_000 ? `${(n / 1000).toFixed(0)} s` : n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`);

/** The verdict as text: one line per dataset, then the totals. */
export function formatReport(r: SimulationReport): string {
  const lines: string[] = [];
  lines.push(`seed ${r.options.seed}, ${r.options.minutes} min, ${r.options.rate} changes/s, ${r.options.orgs} org(s), faults ${r.options.faults ? "on" : "off"}, consumer ${r.options.consumer}`);
  const changes = Object.values(r.generator.changes).reduce((a, b) => a + b, 0);
  lines.push(`generator: ${changes} changes (${r.generator.documents} documents, ${r.generator.longTransactions} long transactions), ${r.generator.refused} refused, ${r.generator.writeRetries} writes retried`);
  lines.push(`change mix: ${Object.entries(r.generator.changes).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(", ")}`);
  const byKind = new Map<string, number>();
  for (const f of r.faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  lines.push(`faults: ${r.faults.length} (${[...byKind].map(([k, n]) => `${k} ${n}`).join(", ") || "none"}); consumer kills/restarts ${r.consumerRestarts}`);
  lines.push(
    `consumer: ${r.counters.pages ?? 0} pages, ${r.counters.rows ?? 0} rows, ${r.counters.retries ?? 0} retries, ${r.counters.rateLimited ?? 0} 429s, ${r.counters.abortedStreams ?? 0} aborted streams, ` +
      (r.options.consumer === "minimal" ? `${r.counters.cursorResets ?? 0} cursor resets` : `${r.counters.fullReads ?? 0} full reads, ${r.counters.tombstoned ?? 0} rows deleted by tombstones, ${r.counters.swept ?? 0} swept`),
  );
  const fullReasons = Object.entries(r.counters).filter(([k]) => k.startsWith("fullReads: "));
  if (fullReasons.length > 0) lines.push(`full reads by reason: ${fullReasons.map(([k, n]) => `${k.slice("fullReads: ".length)} ${n}`).join("; ")}`);
  lines.push("");
  lines.push(["dataset".padEnd(52), "copy", "full", "lost", "stale", "extra", "deleted", "emptied", "rewritten", "| lag p50", "p95", "p99"].join(" "));
  for (const o of r.organizations) {
    for (const d of o.datasets) {
      const l = lagSummary(d.lagMs);
      lines.push(
        [d.dataset.slice(0, 52).padEnd(52), d.copyRows, d.fullRows, d.lost, d.stale, d.extra, d.deletedInSource, d.gridEmptied, d.rewritten, "|", fmt(l.p50), fmt(l.p95), fmt(l.p99)].join(" "),
      );
      for (const e of d.examples) lines.push(`    ${e}`);
    }
    for (const rd of o.retiredDatasets) {
      lines.push(`  retired dataset key ${rd.dataset}: ${rd.rows} rows kept in the copy (${rd.recognized ? "marked retired by the consumer; reported apart" : "NOT marked retired by the consumer: FAIL"})`);
    }
    lines.push(`  organization ${o.organizationId}: ${o.duplicated} duplicated rows (same key twice in a page, or in one pass of the full export)`);
  }
  const t = r.totals;
  lines.push("");
  lines.push(
    `TOTAL lost ${t.lost}, duplicated ${t.duplicated}, stale ${t.stale}, extra ${t.extra}, deleted in source ${t.deletedInSource}, grid emptied ${t.gridEmptied}, ` +
      `rewritten without a last_modified move ${t.rewritten}, full export vs source tables ${t.exportVsSource}, retired keys not marked retired ${t.unretiredKeys}`,
  );
  lines.push(`reported apart (history kept on purpose under a retired key, docs/simulation.md): rows of retired dataset keys ${t.apart.retiredDatasetRows}`);
  lines.push(`lag: ${r.lag.count} row versions, p50 ${fmt(r.lag.p50)}, p95 ${fmt(r.lag.p95)}, p99 ${fmt(r.lag.p99)}, max ${fmt(r.lag.max)}`);
  for (const p of r.problems) lines.push(`PROBLEM: ${p}`);
  lines.push(r.passed ? "VERDICT: PASS" : `VERDICT: FAIL (reproduce: npm run simulate -- --seed ${r.options.seed} --minutes ${r.options.minutes} --rate ${r.options.rate} --orgs ${r.options.orgs}${r.options.faults ? "" : " --no-faults"})`);
  return lines.join("\n");
}
