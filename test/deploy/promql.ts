import { parser } from "@prometheus-io/lezer-promql";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { GatewayMetrics } from "../../services/gateway/src/metrics";
import { SchemaMetrics } from "../../services/schema/src/metrics";
import { ExportMetrics } from "../../services/export/src/metrics";

export interface ParsedQuery {
  /** Syntax error positions (empty when the expression parses). */
  errors: number[];
  /** Metric names of the expression's vector selectors. */
  metrics: string[];
}

export function parsePromql(expr: string): ParsedQuery {
  const tree = parser.parse(expr);
  const errors: number[] = [];
  const metrics = new Set<string>();
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === "Identifier" && node.node.parent?.name === "VectorSelector") metrics.add(expr.slice(node.from, node.to));
    },
  });
  return { errors, metrics: [...metrics] };
}

/** Grafana's template variables, replaced by values PromQL accepts. */
export function substituteGrafanaVariables(expr: string): string {
  return expr
    .replace(/\$__rate_interval|\$__interval|\$__range/g, "5m")
    .replace(/\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/g, "x");
}

/**
 * Every series name the services' registries expose (the shared families and each service's own;
 * the gateway's, schema's and export's registries hold the shared ones too): each metric family
 * plus the _bucket, _sum, _count series of histograms and summaries.
 */
export async function exposedSeriesNames(): Promise<Set<string>> {
  const names = new Set<string>();
  const registries = [new GatewayMetrics().registry, new SchemaMetrics({ defaultMetrics: false }).registry, new ExportMetrics({ defaultMetrics: false }).registry];
  for (const metric of (await Promise.all(registries.map((r) => r.getMetricsAsJSON()))).flat()) {
    names.add(metric.name);
    const type = String(metric.type);
    if (type === "histogram") ["_bucket", "_sum", "_count"].forEach((s) => names.add(metric.name + s));
    if (type === "summary") ["_sum", "_count"].forEach((s) => names.add(metric.name + s));
  }
  return names;
}

/** The chart's rules/alerts.yaml and values.yaml (prometheusRule) as the chart reads them. */
const CHART_DIR = join(__dirname, "..", "..", "charts", "dataset-export");
export const alertRulesSource = (): string => readFileSync(join(CHART_DIR, "rules", "alerts.yaml"), "utf8");
export interface ChartRuleValues {
  runbookBaseUrl: string;
  undeclaredWriterHoldSeconds: number;
  maintenanceLagSeconds: number;
}
export const chartRuleValues = (): ChartRuleValues =>
  (parse(readFileSync(join(CHART_DIR, "values.yaml"), "utf8")) as { prometheusRule: ChartRuleValues }).prometheusRule;

/**
 * rules/alerts.yaml with its placeholders replaced as templates/prometheusrule.yaml does with the
 * default values (forDuration and rangeWindow are empty by default: every `for:` and range as
 * written), without running helm; the helm render itself is compared in helm-chart.test.ts.
 */
export function alertRulesWithDefaultValues(): string {
  const values = chartRuleValues();
  return alertRulesSource()
    .replaceAll("__RUNBOOK_BASE_URL__", values.runbookBaseUrl.replace(/\/$/, ""))
    .replaceAll("__UNDECLARED_WRITER_HOLD_SECONDS__", String(values.undeclaredWriterHoldSeconds))
    .replaceAll("__MAINTENANCE_LAG_SECONDS__", String(values.maintenanceLagSeconds));
}
