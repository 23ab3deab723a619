/**
 * `npm run observe`: a local Prometheus scraping the running `npm start` stack with the chart's
 * alerting rules (as `helm template` renders them), to try the alerts and the dashboard's queries by
 * hand (docs/observability.md). The services' metrics ports come from the variables npm start uses
 * (METRICS_PORT and the next three); Prometheus listens on PROMETHEUS_PORT (default 9090) and keeps
 * its data under .data/prometheus. Arguments are passed to `helm template`, e.g.
 *   npm run observe -- --set prometheusRule.forDuration=30s --set prometheusRule.rangeWindow=1m
 */
import { join } from "node:path";
import { accepts } from "./lib/stack";
import { DEFAULT_METRICS_PORT, METRICS_PORT_ORDER, describePortOwner, freePort, portFromEnv, portIsFree } from "./lib/ports";
import { prometheusConfig, prometheusMissing, renderChartRules, startPrometheus } from "./lib/prometheus";
import { REPO_ROOT } from "./lib/chart";
import { runAsScript } from "./lib/run-script";
import { kubeTool } from "./tools/kube-tools";

/** The namespace label the dashboard's $namespace variable selects. */
const NAMESPACE = "local";

async function main(helmArgs: string[]): Promise<number> {
  const missing = prometheusMissing();
  if (missing) {
    process.stderr.write(`npm run observe needs Prometheus: ${missing}\n`);
    return 1;
  }
  const metricsBase = portFromEnv("METRICS_PORT", DEFAULT_METRICS_PORT);
  if (metricsBase === 0) {
    throw new Error("METRICS_PORT=0: npm start picked four free metrics ports; set METRICS_PORT to the first one it printed (gateway's)");
  }
  let port = portFromEnv("PROMETHEUS_PORT", 9090);
  if (port === 0) port = await freePort();
  else if (!(await portIsFree(port))) {
    throw new Error(`port ${port} (PROMETHEUS_PORT) is taken by ${describePortOwner(port) ?? "another process"}: set PROMETHEUS_PORT to another port, or to 0 for any free port`);
  }
  const targets = METRICS_PORT_ORDER.map((component, i) => ({ component, address: `127.0.0.1:${metricsBase + i}` }));
  const down: string[] = [];
  for (const t of targets) if (!(await accepts(Number(t.address.split(":")[1])))) down.push(`${t.component} ${t.address}`);
  if (down.length > 0) {
    process.stderr.write(`not answering yet (is npm start running with the same METRICS_PORT?): ${down.join(", ")}; Prometheus scrapes them once they are\n`);
  }

  const rules = renderChartRules(await kubeTool("helm"), {}, helmArgs);
  const prometheus = await startPrometheus({
    dir: join(REPO_ROOT, ".data", "prometheus"),
    listen: `127.0.0.1:${port}`,
    rules,
    output: "inherit",
    config: (rulesFile) => prometheusConfig({ targets, namespace: NAMESPACE, rulesFile, scrapeInterval: "5s", evaluationInterval: "5s" }),
  });
  process.stdout.write(
    [
      "",
      `Prometheus is running: ${prometheus.url}`,
      `  Alerts:  ${prometheus.url}/alerts   (the chart's rules${helmArgs.length ? ` with ${helmArgs.join(" ")}` : ""})`,
      `  Targets: ${prometheus.url}/targets  (${targets.map((t) => `${t.component} ${t.address}`).join(", ")})`,
      `  Queries: ${prometheus.url}/graph    (the dashboard's, with namespace="${NAMESPACE}")`,
      "",
      "Press Ctrl-C to stop.",
      "",
    ].join("\n"),
  );
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
    prometheus.process.once("exit", resolve);
  });
  await prometheus.stop();
  process.stdout.write("stopped\n");
  return prometheus.process.exitCode && prometheus.process.exitCode !== 0 ? 1 : 0;
}

runAsScript(module, main);
