import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { DEFAULT_VALUE_ARGS, helmTemplate } from "./chart";
import type { ServiceName } from "./stack";

/**
 * A real Prometheus (Debian's `prometheus` package, the one that ships promtool) scraping the four
 * services' /metrics with the chart's alerting rules as `helm template` renders them. Used by the
 * end-to-end alert test (test/e2e/alerts.e2e.test.ts) and `npm run observe`.
 */

/** PROMETHEUS_BIN, else `prometheus` on PATH. */
export function prometheusBinary(): string {
  return process.env.PROMETHEUS_BIN?.trim() || "prometheus";
}

/** Undefined when the binary runs, else why not (and how to install it). */
export function prometheusMissing(bin = prometheusBinary()): string | undefined {
  const result = spawnSync(bin, ["--version"], { encoding: "utf8" });
  if (result.status === 0) return undefined;
  return `${bin} --version failed (${result.error?.message ?? `exit ${result.status}`}): install Debian's prometheus package (apt-get install -y --no-install-recommends prometheus) or set PROMETHEUS_BIN`;
}

/**
 * The PrometheusRule's groups as the chart renders them with its defaults and `setValues`
 * (e.g. prometheusRule.forDuration=5s), as a Prometheus rule file.
 */
export function renderChartRules(helm: string, setValues: Record<string, string | number> = {}, extraArgs: string[] = []): string {
  const sets = Object.entries(setValues).flatMap(([key, value]) => ["--set", `${key}=${value}`]);
  const objects = helmTemplate(helm, [...DEFAULT_VALUE_ARGS, "--show-only", "templates/prometheusrule.yaml", ...sets, ...extraArgs]);
  const rule = objects.find((o) => o.kind === "PrometheusRule") as { spec?: { groups?: unknown[] } } | undefined;
  if (!rule?.spec?.groups) throw new Error("the chart rendered no PrometheusRule with groups (prometheusRule.enabled=false?)");
  return stringify({ groups: rule.spec.groups });
}

export interface ScrapeTarget {
  component: ServiceName;
  /** host:port of its /metrics. */
  address: string;
}

/**
 * prometheus.yml: one job scraping every target with the labels the chart's ServiceMonitor and the
 * prometheus-operator give a pod (`component`, `namespace`, `pod`), so the rules and the dashboard
 * select and aggregate exactly as in a cluster.
 */
export function prometheusConfig(opts: { targets: ScrapeTarget[]; namespace: string; rulesFile: string; scrapeInterval: string; evaluationInterval: string }): string {
  return stringify({
    global: { scrape_interval: opts.scrapeInterval, scrape_timeout: opts.scrapeInterval, evaluation_interval: opts.evaluationInterval },
    rule_files: [opts.rulesFile],
    scrape_configs: [
      {
        job_name: "dataset-export",
        metrics_path: "/metrics",
        static_configs: opts.targets.map((t) => ({
          targets: [t.address],
          labels: { component: t.component, namespace: opts.namespace, pod: `${t.component}-0` },
        })),
      },
    ],
  });
}

export interface PrometheusAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing";
  activeAt: string;
  value: string;
}

export interface PrometheusRuleState {
  name: string;
  type: string;
  health: string;
  lastError?: string;
  state?: string;
}

export interface RunningPrometheus {
  url: string;
  process: ChildProcess;
  /** Prometheus' own /api/v1/alerts: pending and firing alerts. */
  alerts(): Promise<PrometheusAlert[]>;
  /** Every rule's evaluation state (/api/v1/rules). */
  rules(): Promise<PrometheusRuleState[]>;
  /** An instant query (/api/v1/query); its result vector or matrix. */
  query(expr: string): Promise<{ metric: Record<string, string>; value?: [number, string] }[]>;
  /** Last lines Prometheus wrote (for failure messages). */
  log(): string;
  stop(): Promise<void>;
}

async function api<T>(url: string): Promise<T> {
  const res = await fetch(url);
  const body = (await res.json()) as { status: string; data: T; error?: string };
  if (body.status !== "success") throw new Error(`${url}: ${body.error ?? res.status}`);
  return body.data;
}

/**
 * Writes the configuration and rules into `dir`, starts Prometheus on `listen` (host:port) with its
 * data under `dir`/data, and resolves once it is ready. `output: inherit` shows its log (observe).
 */
export async function startPrometheus(opts: {
  dir: string;
  listen: string;
  config: (rulesFile: string) => string;
  rules: string;
  output?: "inherit" | "collect";
  bin?: string;
  timeoutMs?: number;
}): Promise<RunningPrometheus> {
  mkdirSync(join(opts.dir, "data"), { recursive: true });
  const rulesFile = join(opts.dir, "rules.yaml");
  const configFile = join(opts.dir, "prometheus.yml");
  writeFileSync(rulesFile, opts.rules);
  writeFileSync(configFile, opts.config(rulesFile));
  const output = opts.output ?? "collect";
  const child = spawn(
    opts.bin ?? prometheusBinary(),
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(opts.dir, "data")}`,
      `--web.listen-address=${opts.listen}`,
      "--storage.tsdb.retention.time=1d",
      "--log.level=warn",
    ],
    { stdio: output === "inherit" ? ["ignore", "inherit", "inherit"] : ["ignore", "pipe", "pipe"] },
  );
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(chunk.toString("utf8"));
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const url = `http://${opts.listen}`;
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.once("exit", () => {
        clearTimeout(killer);
        resolve();
      });
      child.kill("SIGTERM");
    });
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`prometheus exited (${child.exitCode ?? child.signalCode}) during start-up: ${lines.join("").slice(-3000)}`);
    }
    const ready = await fetch(`${url}/-/ready`).then((r) => r.ok, () => false);
    if (ready) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus at ${url} not ready within ${opts.timeoutMs ?? 30_000} ms: ${lines.join("").slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    process: child,
    alerts: async () => (await api<{ alerts: PrometheusAlert[] }>(`${url}/api/v1/alerts`)).alerts,
    rules: async () => (await api<{ groups: { rules: PrometheusRuleState[] }[] }>(`${url}/api/v1/rules`)).groups.flatMap((g) => g.rules),
    query: async (expr) => (await api<{ result: { metric: Record<string, string>; value?: [number, string] }[] }>(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`)).result,
    log: () => lines.join(""),
    stop,
  };
}
