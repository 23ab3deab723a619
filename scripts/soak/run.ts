import { mkdirSync, writeFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { dirname, join } from "node:path";
import { createPool } from "@exportsvc/db";
import { OrgChurn, runChurn, writeChange } from "../simulate/churn";
import { createSimOrganization, startCluster } from "../simulate/cluster";
import { FaultInjector, faultSchedule, FAULT_KINDS, type FaultKind, type InjectedFault } from "../simulate/faults";
import { installLagProbe } from "../simulate/lag-probe";
import { Random } from "../simulate/random";
import { restoreComponents, runFaults, SERVICES, waitForFormMaintenance, waitForSettledTokens, watchdog } from "../simulate/run";
import { failed, orgVerdict, totals, type OrgVerdict, type Totals } from "../simulate/verdict";
import { Gate, SoakConsumer, type ConsumerCounters } from "./consumer";
import { startConsumerPostgres, type ConsumerPostgres } from "./consumer-postgres";
import { HttpLatencyRecorder, serverErrors, summarize, type EndpointSummary, type Endpoint } from "./http-latency";
import { plotSoak } from "./plot";
import { rssGrowth, type RssGrowth } from "./memory-growth";
import { v8Memory, postgresBackends, procMemory, type BackendGroup, type ServiceMemory } from "./resources";
import { readRouteBuckets, serverLatencyBetween, type BucketCounts, type ServerLatency } from "./server-latency";

/** The listing's route as the gateway labels its metrics (koa-router's matched pattern). */
const LISTING_ROUTE = "/v1/datasets";
/** The listing target's bound, seconds. */
const LISTING_P99_TARGET_SECONDS = 0.05;

/**
 * `npm run soak`: many organizations living on one stack for a long time (docs/soak.md). M
 * organizations of mixed sizes, each with a consumer (the sync client's engine) polling its listing
 * with If-None-Match and syncing what moved, the churn generator writing to all of them throughout,
 * faults optional. Every `sampleSeconds` it records per endpoint latency percentiles and status
 * counts, each service's RSS and heap, and PostgreSQL's connections and backend memory; at the end
 * the simulation's verdict for every organization (copy = fresh full export = source).
 */
export interface SoakOptions {
  minutes: number;
  orgs: number;
  faults: boolean;
  seed: number;
  /** Changes per second over all organizations. */
  rate: number;
  pollSeconds: number;
  pageLimit: number;
  sampleSeconds: number;
  /** Consumer passes at once (each consumer keeps its copy open between passes). */
  passConcurrency: number;
  /** Niceness of the consumers' PostgreSQL, where the copies live (./consumer-postgres.ts); 0: none. */
  consumerNice: number;
  outDir: string;
  /** Where the plot goes ("" for none). */
  png: string;
  log?: (line: string) => void;
}

/** Organization sizes: share of the organizations, share of the churn (weight) and changes written before the run. */
const SIZES = [
  { size: "small", share: 0.6, weight: 1, seedChanges: 0 },
  { size: "medium", share: 0.3, weight: 3, seedChanges: 8 },
  { size: "large", share: 0.1, weight: 9, seedChanges: 30 },
] as const;
type Size = (typeof SIZES)[number]["size"];

/** Faults the soak plays: the simulation's, except killing a consumer (these run in the soak's own process). */
export const SOAK_FAULT_KINDS: FaultKind[] = FAULT_KINDS.filter((k) => k !== "kill-consumer-mid-page");

export interface Sample {
  /** Seconds since the run started. */
  t: number;
  endpoints: Partial<Record<Endpoint, EndpointSummary>>;
  services: ServiceMemory[];
  /** The soak's own process (generator, consumers, copies' clients). */
  driverRssBytes: number | null;
  /** How late the soak's own event loop ran timers in this sample (ms): a response waits that long before it is timed. */
  driverLoopDelay: { p99Ms: number; maxMs: number };
  postgres: BackendGroup[];
}

export interface SoakReport {
  options: Omit<SoakOptions, "log">;
  startedAt: string;
  seedSeconds: number;
  runSeconds: number;
  organizations: Record<Size, number>;
  changesWritten: number;
  refused: number;
  faults: InjectedFault[];
  serviceCrashes: { service: string; at: number; exit: string }[];
  consumers: ConsumerCounters;
  consumerErrors: string[];
  samples: Sample[];
  overall: Partial<Record<Endpoint, EndpointSummary>>;
  /** The same from minute 5 (the middle of a shorter run): what the latency targets judge. */
  fromBaseline: Partial<Record<Endpoint, EndpointSummary>>;
  /** The gateway's own histogram of its listing answers from minute 5 (./server-latency.ts). */
  serverListingFromBaseline: ServerLatency | null;
  serverErrors: number;
  /** Each service's RSS floor at the end against minute 5 (./memory-growth.ts). */
  memory: RssGrowth[];
  targets: { name: string; value: string; met: boolean }[];
  totals: Totals;
  failedOrganizations: string[];
  /** The verdicts of the organizations whose copy differs (datasets with examples; lags left out). */
  failedVerdicts: OrgVerdict[];
  problems: string[];
  passed: boolean;
}

async function inBatches<T>(items: T[], concurrency: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) await fn(items[i], i);
    }),
  );
}


export async function soak(opts: SoakOptions): Promise<SoakReport> {
  const t0 = Date.now();
  const log = opts.log ?? ((line: string) => process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)}s] ${line}\n`));
  const problems: string[] = [];
  const recorder = new HttpLatencyRecorder();
  // Connections: the services' pools and the generator's pool (the copies have their own server).
  const maxConnections = 200;
  const cluster = await startCluster({ log, redis: true, postgresFlags: ["-c", `max_connections=${maxConnections}`] });
  const keyHashSecret = (cluster.stack as unknown as { keyHashSecret: string }).keyHashSecret;
  const consumers: SoakConsumer[] = [];
  let copies: ConsumerPostgres | undefined;
  const statsPool = createPool({ connectionString: cluster.databaseUrl, max: 1, applicationName: "soak-sampler" });
  statsPool.on("error", () => undefined);
  const sourcePool = createPool({ connectionString: cluster.databaseUrl, max: 16, applicationName: "soak-generator" });
  sourcePool.on("error", () => undefined);
  let stopWatchdog = () => undefined as void;
  try {
    // Each consumer keeps its copy open (a writer lock and up to three pooled connections), as `watch` does.
    copies = await startConsumerPostgres({ niceness: opts.consumerNice, maxConnections: opts.orgs * 4 + 50, log });
    const copyServer = copies;
    const rnd = Random.derived(opts.seed, "soak");
    const gate = new Gate(opts.passConcurrency);
    const orgs: { id: string; size: Size; weight: number; apiKey: string; churn: OrgChurn; copyUrl: string; consumer?: SoakConsumer }[] = [];
    for (let i = 0; i < opts.orgs; i++) {
      const x = (i + 0.5) / opts.orgs; // sizes by share, shuffled below by the ids
      let acc = 0;
      const tier = SIZES.find((s) => x < (acc += s.share)) ?? SIZES[0];
      orgs.push({ id: Random.derived(opts.seed, `soak organization ${i}`).uuid(), size: tier.size, weight: tier.weight, apiKey: "", churn: undefined as unknown as OrgChurn, copyUrl: "" });
    }
    const seedStart = Date.now();
    const noStop = () => false;
    await inBatches(orgs, 4, async (o, i) => {
      o.apiKey = (await createSimOrganization(cluster.databaseUrl, keyHashSecret, o.id, `Soak org ${i + 1} (${o.size})`)).apiKey;
      o.churn = new OrgChurn(o.id, opts.seed);
      const write = { pool: sourcePool, ratePerSecond: 1, shouldStop: noStop, log };
      if (!(await writeChange(o.churn, o.churn.initial(), write))) throw new Error(`the initial document of organization ${o.id} was refused: ${o.churn.counters.refusals.join("; ")}`);
      const extra = SIZES.find((s) => s.size === o.size)!.seedChanges;
      for (let k = 0; k < extra; k++) await writeChange(o.churn, o.churn.next(), write);
      o.copyUrl = await copyServer.createDatabase(`copy_${i}`);
      await installLagProbe(o.copyUrl);
      if ((i + 1) % 25 === 0) log(`seeded ${i + 1} of ${opts.orgs} organizations`);
    });
    const seedSeconds = (Date.now() - seedStart) / 1000;
    log(`${opts.orgs} organizations seeded in ${seedSeconds.toFixed(0)} s; consumers poll every ~${opts.pollSeconds} s`);

    for (const o of orgs) {
      const orgRnd = Random.derived(opts.seed, `soak consumer ${o.id}`);
      o.consumer = new SoakConsumer({
        organizationId: o.id, baseUrl: cluster.stack.baseUrl, apiKey: o.apiKey, copyUrl: o.copyUrl,
        pollMs: opts.pollSeconds * 1000, pageLimit: opts.pageLimit, gate, random: () => orgRnd.float(), log,
      });
      consumers.push(o.consumer);
    }
    recorder.takeWindow(); // the seeding's requests (none over HTTP but the readiness probe) are not the run's
    for (const c of consumers) c.start();

    const startedAt = Date.now();
    const runMs = opts.minutes * 60_000;
    let stopping = false;
    const shouldStop = () => stopping || Date.now() - startedAt >= runMs;

    const samples: Sample[] = [];
    // Memory and latency are judged from minute 5 (the middle of a shorter run): before it, every
    // copy makes its first full read at once, a herd of initial backfills production never sees.
    const baselineT = Math.min(300, runMs / 2000);
    let baselineObservation: number | undefined;
    let baselineListingBuckets: BucketCounts | null = null;
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const sample = async () => {
      const t = (Date.now() - startedAt) / 1000;
      if (baselineObservation === undefined && t >= baselineT) {
        baselineObservation = recorder.all.length;
        baselineListingBuckets = await readRouteBuckets(cluster.metricsPorts.gateway, LISTING_ROUTE);
      }
      const driverLoopDelay = { p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
      loopDelay.reset();
      const endpoints = summarize(recorder.takeWindow());
      const services = await Promise.all(
        SERVICES.map(async (service) => ({
          service,
          rssBytes: procMemory(cluster.stack.processes[service].pid)?.rssBytes ?? null,
          ...(await v8Memory(cluster.metricsPorts[service])),
        })),
      );
      const postgres = await postgresBackends(statsPool).catch(() => [] as BackendGroup[]);
      const s: Sample = { t, endpoints, services, driverRssBytes: process.memoryUsage().rss, driverLoopDelay, postgres };
      samples.push(s);
      const l = endpoints.listing;
      const p = endpoints.page;
      const mb = (b: number | null | undefined) => (b == null ? "-" : `${Math.round(b / 2 ** 20)}`);
      log(
        `t=${t.toFixed(0)}s listing ${l?.requests ?? 0} (p99 ${l?.p99?.toFixed(1) ?? "-"} ms) page ${p?.requests ?? 0} (ttfb p99 ${p?.p99?.toFixed(1) ?? "-"} ms) ` +
          `5xx ${Object.values(endpoints).reduce((n, e) => n + Object.entries(e!.statuses).filter(([k]) => k.startsWith("5")).reduce((a, [, v]) => a + v, 0), 0)} | RSS MB ` +
          services.map((x) => `${x.service} ${mb(x.rssBytes)}`).join(", ") +
          ` | pg ${postgres.reduce((n, g) => n + g.connections, 0)} conns, ${mb(postgres.reduce((n, g) => n + g.anonBytes, 0))} MB private` +
          ` | driver loop delay p99 ${driverLoopDelay.p99Ms.toFixed(0)} ms`,
      );
    };
    let sampling = Promise.resolve();
    const sampler = setInterval(() => {
      sampling = sampling.then(sample).catch((err) => log(`sample failed: ${(err as Error).message}`));
    }, opts.sampleSeconds * 1000);

    const injector = new FaultInjector(cluster, [], log);
    let injecting = false;
    const crashes: SoakReport["serviceCrashes"] = [];
    stopWatchdog = watchdog(cluster, () => injecting, crashes, log);
    const schedule = opts.faults ? faultSchedule(opts.seed, runMs, 20_000, SOAK_FAULT_KINDS) : [];
    if (opts.faults) log(`fault schedule: ${schedule.length} faults`);
    const faultRun = runFaults(injector, schedule, startedAt, shouldStop, (on) => (injecting = on));

    const totalWeight = orgs.reduce((s, o) => s + o.weight, 0);
    await Promise.all(orgs.map((o) => runChurn(o.churn, { pool: sourcePool, ratePerSecond: (opts.rate * o.weight) / totalWeight, shouldStop, log })));
    stopping = true;
    await faultRun;
    clearInterval(sampler);
    await sampling;
    await sample();
    loopDelay.disable();
    const endListingBuckets = await readRouteBuckets(cluster.metricsPorts.gateway, LISTING_ROUTE);
    const serverListingFromBaseline = endListingBuckets && serverLatencyBetween(baselineListingBuckets, endListingBuckets, LISTING_P99_TARGET_SECONDS);
    const runObservations = recorder.all.slice();
    const runSeconds = (Date.now() - startedAt) / 1000;
    log("churn stopped; consumers stop polling; restoring every component");
    await Promise.all(consumers.map((c) => c.halt()));
    await restoreComponents(cluster, stopWatchdog, crashes);
    if (crashes.length > 0) problems.push(`${crashes.length} service exit(s) that no fault caused: ${crashes.map((c) => `${c.service} (${c.exit})`).join(", ")}`);

    await waitForFormMaintenance(cluster.databaseUrl, 180_000, log);
    log("final incremental pass of every copy, a fresh full export of every organization, then the verdict");
    const verdicts: OrgVerdict[] = [];
    const failedOrganizations: string[] = [];
    let checked = 0;
    await inBatches(orgs, 4, async (o, i) => {
      const held = await waitForSettledTokens(cluster.stack.baseUrl, o.apiKey, 60_000);
      if (held.length > 0) problems.push(`organization ${o.id}: tokens still held 60 s after the source went quiet: ${held.join(", ")}`);
      const last = await o.consumer!.pass().catch((err: Error) => err);
      if (last instanceof Error || last.failed.length > 0) problems.push(`final pass of ${o.id} failed: ${last instanceof Error ? last.message : JSON.stringify(last.failed)}`);
      const fullUrl = await copyServer.createDatabase(`full_${i}`);
      const full = await o.consumer!.pass(undefined, 5000, fullUrl).catch((err: Error) => err);
      if (full instanceof Error || full.failed.length > 0) problems.push(`full export of ${o.id} failed: ${full instanceof Error ? full.message : JSON.stringify(full.failed)}`);
      const v = await orgVerdict({ sourceUrl: cluster.databaseUrl, copyUrl: o.copyUrl, fullUrl, organizationId: o.id, since: new Date(startedAt), layout: "sync-client" });
      verdicts.push(v);
      if (failed(totals([v]))) failedOrganizations.push(o.id);
      if (++checked % 25 === 0) log(`verdict: ${checked} of ${opts.orgs} organizations checked`);
    });
    const t = totals(verdicts);

    const consumerTotals = {} as ConsumerCounters;
    for (const c of consumers) for (const [k, n] of Object.entries(c.counters)) consumerTotals[k as keyof ConsumerCounters] = (consumerTotals[k as keyof ConsumerCounters] ?? 0) + n;
    const consumerErrors = consumers.flatMap((c) => c.errors).slice(0, 30);
    const overall = summarize(runObservations);
    const fromBaseline = summarize(runObservations.slice(baselineObservation ?? 0));
    const fivexx = serverErrors(runObservations);
    if (!opts.faults && fivexx > 0) problems.push(`${fivexx} response(s) ≥ 500 without faults`);

    // Memory: every service's RSS floor at the end against its floor around minute 5.
    const memory = rssGrowth(samples, SERVICES, baselineT);
    const baselineMinute = memory[0]?.baselineMinute ?? 0;
    const fmt = (n: number | null | undefined) => (n == null ? "-" : n.toFixed(1));
    const pct = (n: number | null) => (n === null ? "-" : `${n >= 0 ? "+" : ""}${n.toFixed(1)} %`);
    const targets = [
      { name: "responses ≥ 500" + (opts.faults ? " (faults on: reported, not a target)" : ""), value: String(fivexx), met: opts.faults || fivexx === 0 },
      ...memory.map((m) => ({
        name: `${m.service} RSS at the end within +10 % of minute ${m.baselineMinute} (lowest of each half after it, ${Math.round(m.windowSeconds)} s)`,
        value: `${pct(m.growthPercent)} (single samples ${pct(m.sampleGrowthPercent)})`,
        met: m.growthPercent !== null && m.growthPercent <= 10,
      })),
      {
        name: `listing p99 < 50 ms from minute ${baselineMinute}`,
        value: `${fmt(fromBaseline.listing?.p99)} ms (whole run ${fmt(overall.listing?.p99)} ms; from minute ${baselineMinute}: 200s ${fmt(fromBaseline.listing?.p99ByStatus["200"])} ms, 304s ${fmt(fromBaseline.listing?.p99ByStatus["304"])} ms; ${serverShare(serverListingFromBaseline)})`,
        met: (fromBaseline.listing?.p99 ?? Infinity) < LISTING_P99_TARGET_SECONDS * 1000,
      },
      { name: `page time to first byte p99 < 200 ms from minute ${baselineMinute}`, value: `${fmt(fromBaseline.page?.p99)} ms (whole run ${fmt(overall.page?.p99)} ms)`, met: (fromBaseline.page?.p99 ?? Infinity) < 200 },
      { name: "every copy equal to its source", value: `${opts.orgs - failedOrganizations.length} of ${opts.orgs}`, met: failedOrganizations.length === 0 && verdicts.length === opts.orgs },
    ];
    const organizations = { small: 0, medium: 0, large: 0 } as Record<Size, number>;
    for (const o of orgs) organizations[o.size]++;
    const report: SoakReport = {
      options: { ...opts, log: undefined } as Omit<SoakOptions, "log">,
      startedAt: new Date(startedAt).toISOString(),
      seedSeconds,
      runSeconds,
      organizations,
      changesWritten: orgs.reduce((s, o) => s + Object.values(o.churn.counters.changes).reduce((a, b) => a + b, 0), 0),
      refused: orgs.reduce((s, o) => s + o.churn.counters.refused, 0),
      faults: injector.injected,
      serviceCrashes: crashes,
      consumers: consumerTotals,
      consumerErrors,
      samples,
      overall,
      fromBaseline,
      serverListingFromBaseline,
      serverErrors: fivexx,
      memory,
      targets,
      totals: t,
      failedOrganizations,
      failedVerdicts: verdicts
        .filter((v) => failedOrganizations.includes(v.organizationId))
        .map((v) => ({ ...v, lagPoints: [], datasets: v.datasets.map((d) => ({ ...d, lagMs: [] })) })),
      problems,
      passed: !failed(t) && failedOrganizations.length === 0 && problems.length === 0,
    };
    mkdirSync(opts.outDir, { recursive: true });
    writeFileSync(join(opts.outDir, "soak-report.json"), JSON.stringify(report, null, 2));
    if (opts.png) {
      mkdirSync(dirname(opts.png), { recursive: true });
      await plotSoak(opts.png, report);
    }
    return report;
  } finally {
    stopWatchdog();
    recorder.close();
    await Promise.all(consumers.map((c) => c.close().catch(() => undefined)));
    await statsPool.end().catch(() => undefined);
    await sourcePool.end().catch(() => undefined);
    await cluster.close();
    await copies?.close();
  }
}

/** The gateway's histogram's view of the listing, for the target's line. */
function serverShare(s: ServerLatency | null): string {
  if (!s || s.shareWithin === null) return "the gateway's histogram: no listings";
  const bound = s.p99AtMostSeconds === Infinity ? "above its largest bucket" : `≤ ${(s.p99AtMostSeconds! * 1000).toFixed(0)} ms`;
  return `the gateway's histogram: ${(s.shareWithin * 100).toFixed(2)} % of ${s.requests} within ${(s.withinSeconds * 1000).toFixed(0)} ms, p99 ${bound}`;
}

/** The report as text: the run, the targets, the verdict. */
export function formatSoakReport(r: SoakReport): string {
  const o = r.options;
  const lines: string[] = [];
  lines.push(`soak: ${o.minutes} min × ${o.orgs} organizations (${r.organizations.small} small, ${r.organizations.medium} medium, ${r.organizations.large} large), faults ${o.faults ? `on (${r.faults.length})` : "off"}, seed ${o.seed}, copies on their own PostgreSQL at nice ${o.consumerNice ?? 0}`);
  lines.push(`generator: ${r.changesWritten} changes at ${o.rate}/s, ${r.refused} refused; seeding ${r.seedSeconds.toFixed(0)} s`);
  const c = r.consumers;
  lines.push(`consumers: ${c.passes} passes (${c.notModified} listings 304, ${c.modified} modified), ${c.pages} pages, ${c.rows} rows, ${c.retries} retries, ${c.datasetErrors} dataset errors, ${c.passErrors} failed passes, ${c.latePasses} late passes`);
  lines.push("");
  lines.push("endpoint   requests  p50 ms  p95 ms  p99 ms  statuses");
  for (const [endpoint, e] of Object.entries(r.overall)) {
    if (!e || endpoint === "other") continue;
    const f = (n: number | null) => (n === null ? "-" : n.toFixed(1)).padStart(7);
    lines.push(`${endpoint.padEnd(10)} ${String(e.requests).padStart(8)} ${f(e.p50)} ${f(e.p95)} ${f(e.p99)}  ${Object.entries(e.statuses).map(([s, n]) => `${s}: ${n}`).join(", ")}`);
  }
  lines.push("(listing: whole response; page and deletions: time to the response head, i.e. first byte)");
  const delays = r.samples.map((s) => s.driverLoopDelay?.p99Ms).filter((d): d is number => d !== undefined).sort((a, b) => a - b);
  if (delays.length > 0) lines.push(`the soak's own event loop, delay p99 per sample: median ${delays[Math.floor(delays.length / 2)].toFixed(0)} ms, max ${delays[delays.length - 1].toFixed(0)} ms (a response waits that long before it is timed)`);
  lines.push("");
  for (const m of r.memory) {
    const mb = (b: number | null) => (b === null ? "-" : `${(b / 2 ** 20).toFixed(0)} MB`);
    lines.push(`${m.service.padEnd(8)} RSS ${mb(m.baselineBytes)} at minute ${m.baselineMinute} → ${mb(m.endBytes)} at the end; lowest ${mb(m.baselineFloorBytes)} from minute ${m.baselineMinute} → ${mb(m.endFloorBytes)} in the last ${Math.round(m.windowSeconds)} s`);
  }
  const pgEnd = r.samples[r.samples.length - 1]?.postgres ?? [];
  lines.push(`PostgreSQL at the end: ${pgEnd.map((g) => `${g.application} ${g.connections} conns ${(g.anonBytes / 2 ** 20).toFixed(0)} MB (max ${(g.maxAnonBytes / 2 ** 20).toFixed(1)})`).join("; ")}`);
  lines.push("");
  for (const t of r.targets) lines.push(`${t.met ? "met   " : "MISSED"} ${t.name}: ${t.value}`);
  const t = r.totals;
  lines.push(`verdict totals: lost ${t.lost}, duplicated ${t.duplicated}, stale ${t.stale}, extra ${t.extra}, deleted in source ${t.deletedInSource}, grid emptied ${t.gridEmptied}, rewritten ${t.rewritten}, export vs source ${t.exportVsSource}, unretired keys ${t.unretiredKeys}`);
  for (const v of r.failedVerdicts.slice(0, 10)) {
    lines.push(`FAILED organization ${v.organizationId}`);
    for (const d of v.datasets) for (const e of d.examples) lines.push(`    ${d.dataset}: ${e}`);
  }
  for (const e of r.consumerErrors.slice(0, 5)) lines.push(`consumer error: ${e}`);
  for (const p of r.problems) lines.push(`PROBLEM: ${p}`);
  lines.push(r.passed ? "VERDICT: PASS" : `VERDICT: FAIL (reproduce: npm run soak -- --seed ${o.seed} --minutes ${o.minutes} --orgs ${o.orgs}${o.faults ? " --faults" : ""})`);
  return lines.join("\n");
}
