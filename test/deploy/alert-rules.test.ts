import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { alertRulesWithDefaultValues, exposedSeriesNames, parsePromql } from "./promql";
import { repoPath } from "./kustomize";

/**
 * `promtool test rules` over the chart's alerting rules: test/deploy/alert-rules.promtool.yaml feeds
 * realistic series to every alert and expects it to fire (labels and rendered annotations) and to
 * resolve. promtool comes with Debian's `prometheus` package (.ci/run installs it); in CI a missing
 * promtool fails this suite, elsewhere its cases are reported as skipped.
 */
const CHART = repoPath("charts", "dataset-export");
const CASES = repoPath("test", "deploy", "alert-rules.promtool.yaml");

interface AlertRule {
  alert: string;
  expr: string;
}
interface RuleTest {
  eval_time: string;
  alertname: string;
  exp_alerts?: { exp_labels?: Record<string, string> }[];
}
interface PromtoolCase {
  name: string;
  input_series: { series: string; values: string }[];
  alert_rule_test?: RuleTest[];
}

const alerts = (parse(readFileSync(join(CHART, "rules", "alerts.yaml"), "utf8")) as { rules: AlertRule[] }[]).flatMap((g) => g.rules);
const cases = (parse(readFileSync(CASES, "utf8")) as { tests: PromtoolCase[] }).tests;

const promtoolVersion = spawnSync("promtool", ["--version"], { encoding: "utf8" });
const hasPromtool = promtoolVersion.status === 0;
const inCi = Boolean(process.env.CI);
if (!hasPromtool && !inCi) {
  process.stderr.write("\nNOTE: promtool not installed (apt-get install prometheus): the alert rule cases are skipped\n\n");
}
const withPromtool = hasPromtool || inCi ? it : it.skip;

/** Seconds of a promtool duration such as "30m" or "1h". */
const seconds = (d: string) => Number(d.slice(0, -1)) * { s: 1, m: 60, h: 3600 }[d.slice(-1) as "s" | "m" | "h"];

describe("alert rules under promtool test rules", () => {
  it("have a case showing every alert firing, and a later one showing it resolved", () => {
    for (const { alert } of alerts) {
      const tests = cases.flatMap((c) => (c.alert_rule_test ?? []).filter((t) => t.alertname === alert));
      const firing = tests.filter((t) => (t.exp_alerts ?? []).length > 0).map((t) => seconds(t.eval_time));
      const quietAfterFiring = tests.filter((t) => (t.exp_alerts ?? []).length === 0 && firing.some((f) => seconds(t.eval_time) > f));
      expect({ alert, firing: firing.length > 0, resolves: quietAfterFiring.length > 0 }).toEqual({ alert, firing: true, resolves: true });
    }
  });

  it("feed only series the services expose", async () => {
    const known = await exposedSeriesNames();
    for (const c of cases) {
      for (const { series } of c.input_series) {
        const [metric] = parsePromql(series).metrics;
        expect({ case: c.name, metric, known: known.has(metric) }).toEqual({ case: c.name, metric, known: true });
      }
    }
  });

  withPromtool("fire and resolve as the cases expect (promtool test rules)", () => {
    if (!hasPromtool) {
      throw new Error(`promtool is not installed (${promtoolVersion.error?.message ?? "promtool --version failed"}): install Debian's prometheus package`);
    }
    const dir = mkdtempSync(join(tmpdir(), "alert-rules-"));
    writeFileSync(join(dir, "rules.yaml"), stringify({ groups: parse(alertRulesWithDefaultValues()) }));
    copyFileSync(CASES, join(dir, "cases.yaml"));
    const result = spawnSync("promtool", ["test", "rules", "cases.yaml"], { cwd: dir, encoding: "utf8" });
    rmSync(dir, { recursive: true, force: true });
    expect({ status: result.status, output: result.status === 0 ? "" : `${result.stdout}${result.stderr}` }).toEqual({ status: 0, output: "" });
    expect(result.stdout).toContain("SUCCESS");
  });
});
