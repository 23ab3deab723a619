import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { alertRulesSource, alertRulesWithDefaultValues, chartRuleValues, exposedSeriesNames, parsePromql, substituteGrafanaVariables } from "./promql";
import { kubectlKustomize, repoPath } from "./kustomize";

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: AlertRule[];
}
interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: { expr: string; refId: string }[];
}

const CHART = repoPath("charts", "dataset-export");
const rulesText = alertRulesSource();
const defaultValues = { prometheusRule: chartRuleValues() };
/** rules/alerts.yaml as the chart's prometheusrule.yaml template inserts it with the default values. */
const renderedRulesText = alertRulesWithDefaultValues();
const groups = parse(rulesText) as RuleGroup[];
const alerts = groups.flatMap((g) => g.rules);
const renderedAlerts = (parse(renderedRulesText) as RuleGroup[]).flatMap((g) => g.rules);
const dashboardText = readFileSync(join(CHART, "dashboards", "dataset-export.json"), "utf8");
const dashboard = JSON.parse(dashboardText) as { uid: string; panels: Panel[]; templating: { list: { name: string }[] } };

function promtool(): string | undefined {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" });
    return "promtool";
  } catch {
    return undefined;
  }
}

describe("alerting rules (charts/dataset-export/rules/alerts.yaml)", () => {
  it("cover every failure the SREs asked for", () => {
    const names = alerts.map((a) => a.alert);
    for (const name of [
      "DatasetExportHighErrorRate",
      "DatasetExportAuthUnavailable",
      "DatasetExportDatasetNotExportable",
      "DatasetExportRebuildFailures",
      "DatasetExportMaintenanceLagHigh",
      "DatasetExportVisibilityHorizonStuck",
      "DatasetExportRateLimitSurge",
    ]) {
      expect(names).toContain(name);
    }
    expect(new Set(names).size).toBe(names.length);
  });

  it("parse as PromQL and use only metrics that metrics.ts defines", async () => {
    const known = await exposedSeriesNames();
    for (const rule of renderedAlerts) {
      const parsed = parsePromql(rule.expr);
      expect({ alert: rule.alert, errors: parsed.errors }).toEqual({ alert: rule.alert, errors: [] });
      expect(parsed.metrics.length).toBeGreaterThan(0);
      for (const metric of parsed.metrics) expect({ alert: rule.alert, metric, known: known.has(metric) }).toEqual({ alert: rule.alert, metric, known: true });
    }
  });

  it("each have a severity, a duration, a summary and a runbook that exists", () => {
    for (const rule of alerts) {
      expect(["critical", "warning"]).toContain(rule.labels?.severity);
      expect(rule.for).toMatch(/^\d+[smh]$/);
      expect(rule.annotations?.summary).toBeTruthy();
      expect(rule.annotations?.runbook_url).toBe(`__RUNBOOK_BASE_URL__/${rule.alert}.md`);
      const runbook = repoPath("docs", "runbooks", `${rule.alert}.md`);
      expect({ runbook, exists: existsSync(runbook) }).toEqual({ runbook, exists: true });
      const text = readFileSync(runbook, "utf8");
      for (const section of ["## Symptoms", "## Impact", "## Diagnosis", "## Remediation"]) expect(text).toContain(section);
      expect(text).toContain(rule.alert);
    }
  });

  it("alert on an undeclared writer holding the visibility horizon past the configured bound, never on readers", () => {
    const rule = renderedAlerts.find((a) => a.alert === "DatasetExportVisibilityHorizonStuck")!;
    expect(rule.expr).toContain('export_visibility_horizon_lag_seconds{holder="undeclared_writer"}');
    expect(rule.expr).toContain(`> ${defaultValues.prometheusRule.undeclaredWriterHoldSeconds}`);
    expect(rulesText).toContain("> __UNDECLARED_WRITER_HOLD_SECONDS__");
    // Firing and resolving under promtool (undeclared writer past the bound; readers and declared
    // writers never): the VisibilityHorizonStuck case of alert-rules.promtool.yaml, one owner.
  });

  it("pass promtool check rules (when promtool is installed) and the parser check (always)", () => {
    const dir = mkdtempSync(join(tmpdir(), "rules-"));
    const file = join(dir, "rules.yaml");
    writeFileSync(file, stringify({ groups: parse(renderedRulesText) }));
    const tool = promtool();
    try {
      if (tool) {
        const out = execFileSync(tool, ["check", "rules", file], { encoding: "utf8" });
        expect(out).toContain(`SUCCESS: ${alerts.length} rules found`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(renderedAlerts.every((a) => parsePromql(a.expr).errors.length === 0)).toBe(true);
  });
});

describe("Grafana dashboard (charts/dataset-export/dashboards/dataset-export.json)", () => {
  const queryPanels = dashboard.panels.filter((p) => p.type !== "row");

  it("queries only metrics that metrics.ts defines, in valid PromQL", async () => {
    const known = await exposedSeriesNames();
    const used = new Set<string>();
    for (const panel of queryPanels) {
      expect(panel.targets?.length).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        const parsed = parsePromql(substituteGrafanaVariables(target.expr));
        expect({ panel: panel.title, errors: parsed.errors }).toEqual({ panel: panel.title, errors: [] });
        for (const metric of parsed.metrics) {
          used.add(metric);
          expect({ panel: panel.title, metric, known: known.has(metric) }).toEqual({ panel: panel.title, metric, known: true });
        }
      }
    }
    // Golden signals of each part: HTTP, gRPC, exports, rebuilds and lag, pools.
    for (const metric of [
      "http_requests_total",
      "http_request_duration_seconds_bucket",
      "grpc_server_handled_total",
      "grpc_server_handling_seconds_bucket",
      "export_rows_total",
      "dataset_maintenance_lag_seconds",
      "dataset_rebuilds_total",
      "db_pool_connections",
    ]) {
      expect(used).toContain(metric);
    }
  });

  it("has unique panel ids and a data source and namespace variable", () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(expect.arrayContaining(["datasource", "namespace"]));
    expect(dashboard.uid).toBe("dataset-export");
  });
});

describe("k8s/ carries the chart's rules and dashboard unchanged", () => {
  const base = kubectlKustomize(repoPath("k8s", "base"));

  it("PrometheusRule groups equal rules/alerts.yaml with the default runbook base URL", () => {
    const rule = base.find((o) => o.kind === "PrometheusRule") as unknown as { spec: { groups: RuleGroup[] } };
    expect(rule.spec.groups).toEqual(parse(renderedRulesText));
  });

  it("dashboard ConfigMap holds the chart's dashboard byte for byte", () => {
    const cm = base.find((o) => o.kind === "ConfigMap" && o.metadata.name === "dataset-export-dashboard") as unknown as {
      data: Record<string, string>;
      metadata: { labels: Record<string, string> };
    };
    expect(cm.data["dataset-export.json"]).toBe(dashboardText);
    expect(cm.metadata.labels.grafana_dashboard).toBe("1");
  });
});
