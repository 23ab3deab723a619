/**
 * Every alert of the chart has series to evaluate from the first scrape: a selector with no series
 * makes rate() empty rather than 0, and a counter born at its first event never shows an increase,
 * so the alert would miss that event. The four services are started and scraped at once, before
 * any request; every vector selector of charts/dataset-export/rules/alerts.yaml (parsed with
 * lezer-promql) must match a series of the service it selects (`component`), or of any service.
 */
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { parser } from "@prometheus-io/lezer-promql";
import type { ServiceName } from "../../scripts/lib/stack";
import { repoPath } from "../deploy/kustomize";
import { startE2E, type E2E } from "../support/fixture";

interface Matcher {
  label: string;
  op: string;
  value: string;
}
interface Selector {
  metric: string;
  matchers: Matcher[];
  text: string;
}
interface Series {
  name: string;
  labels: Record<string, string>;
}

/** Labels Prometheus attaches from the scrape target (the ServiceMonitor), not the service's own. */
const TARGET_LABELS = new Set(["component", "namespace", "pod", "job", "instance", "service"]);

function selectorsOf(expr: string): Selector[] {
  const selectors: Selector[] = [];
  parser.parse(expr).iterate({
    enter(node) {
      if (node.name !== "VectorSelector") return;
      const selector: Selector = { metric: "", matchers: [], text: expr.slice(node.from, node.to) };
      const cursor = node.node.cursor();
      cursor.iterate((inner) => {
        if (inner.name === "Identifier" && !selector.metric) selector.metric = expr.slice(inner.from, inner.to);
        if (inner.name === "UnquotedLabelMatcher") {
          const label = inner.node.getChild("LabelName")!;
          const op = inner.node.getChild("MatchOp")!;
          const value = inner.node.getChild("StringLiteral")!;
          selector.matchers.push({ label: expr.slice(label.from, label.to), op: expr.slice(op.from, op.to), value: JSON.parse(expr.slice(value.from, value.to)) });
        }
      });
      selectors.push(selector);
      return false;
    },
  });
  return selectors;
}

function parseExposition(text: string): Series[] {
  return text
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const name = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(line)![0];
      const labels: Record<string, string> = {};
      const block = line.startsWith("{", name.length) ? line.slice(name.length, line.lastIndexOf("}") + 1) : "";
      for (const m of block.matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = JSON.parse(`"${m[2]}"`);
      return { name, labels };
    });
}

function matches(series: Series, matcher: Matcher): boolean {
  const value = series.labels[matcher.label] ?? "";
  switch (matcher.op) {
    case "=":
      return value === matcher.value;
    case "!=":
      return value !== matcher.value;
    case "=~":
      return new RegExp(`^(?:${matcher.value})$`).test(value);
    case "!~":
      return !new RegExp(`^(?:${matcher.value})$`).test(value);
    default:
      throw new Error(`unknown match operator ${matcher.op}`);
  }
}

/** The rules as the chart inserts them: its __PLACEHOLDERS__ are numbers from values.yaml. */
const rulesText = readFileSync(repoPath("charts", "dataset-export", "rules", "alerts.yaml"), "utf8").replace(/__[A-Z_]+__/g, (placeholder) =>
  placeholder === "__RUNBOOK_BASE_URL__" ? placeholder : "1",
);
const alerts = (parse(rulesText) as { rules: { alert: string; expr: string }[] }[]).flatMap(
  (group) => group.rules,
);

describe("the chart's alerts on a stack that has just started", () => {
  let e2e: E2E;
  const scraped = {} as Record<ServiceName, Series[]>;
  beforeAll(async () => {
    e2e = await startE2E();
    for (const [service, url] of Object.entries(e2e.metricsUrls) as [ServiceName, string][]) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      scraped[service] = parseExposition(await res.text());
    }
  }, 300_000);
  afterAll(() => e2e?.stop());

  it("parse into vector selectors", () => {
    expect(alerts.length).toBeGreaterThan(5);
    for (const alert of alerts) expect(selectorsOf(alert.expr).length).toBeGreaterThan(0);
  });

  it.each(alerts.map((a) => [a.alert, a.expr]))("%s: every selector has a series from the first scrape", (_alert, expr) => {
    const missing: string[] = [];
    for (const selector of selectorsOf(expr)) {
      const component = selector.matchers.find((m) => m.label === "component" && m.op === "=")?.value as ServiceName | undefined;
      const candidates = component ? scraped[component] : Object.values(scraped).flat();
      if (!candidates) throw new Error(`${selector.text}: no service named ${component}`);
      const own = selector.matchers.filter((m) => !TARGET_LABELS.has(m.label));
      if (!candidates.some((s) => s.name === selector.metric && own.every((m) => matches(s, m)))) missing.push(selector.text);
    }
    expect(missing).toEqual([]);
  });
});
