/**
 * `npm run soak -- --minutes N --orgs M [--faults]`: many organizations on one stack for a long
 * time, sampled every 10 s, then the verdict and a plot (docs/soak.md).
 * Exit code: 0 when every copy equals its source and nothing failed (no response ≥ 500 without
 * faults); 1 otherwise; 2 on a usage error. The latency and memory targets are reported, not exit codes.
 */
import { Command, InvalidArgumentError } from "commander";
import { runAsScript } from "./lib/run-script";
import { formatSoakReport, soak } from "./soak/run";

const number = (min: number, max: number, integer = false) => (raw: string) => {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new InvalidArgumentError(`expected ${integer ? "an integer" : "a number"} from ${min} to ${max}`);
  }
  return n;
};

export function soakProgram(): Command {
  return new Command("soak")
    .description("Many organizations polling, syncing and churning on one stack for a long time: latency, memory, and the verdict")
    .option("--minutes <n>", "length of the run (fractions allowed; required)", number(0.2, 24 * 60))
    .option("--orgs <n>", "organizations (required), of mixed sizes (60 % small, 30 % medium, 10 % large)", number(1, 2000, true))
    .option("--faults", "inject faults (service kills, PostgreSQL restart, Redis outage, proxy latency and cuts)", false)
    .option("--seed <n>", "seed of the organizations, the changes and the faults", number(0, 2 ** 31 - 1, true), 1)
    .option("--rate <n>", "changes per second over all organizations (default: orgs / 50, at least 2)", number(0.1, 500))
    .option("--poll <seconds>", "each consumer's time between listing polls", number(0.5, 600), 5)
    .option("--page-limit <n>", "rows per CSV page of the consumers", number(1, 5000, true), 500)
    .option("--sample <seconds>", "time between samples", number(1, 600), 10)
    .option("--pass-concurrency <n>", "consumer passes at once (each consumer keeps its copy open between passes)", number(1, 200, true), 24)
    .option("--consumer-nice <n>", "niceness of the consumers' own PostgreSQL, where the copies live (0: as the service's)", number(0, 19, true), 10)
    .option("--out <dir>", "where soak-report.json goes", "soak-out")
    .option("--png <file>", "the plot (latency and memory over time); '' for none", "soak-out/soak.png")
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    .showHelpAfterError("(run with --help for the options)");
}

async function main(argv: string[]): Promise<number> {
  const program = soakProgram();
  try {
    program.parse(argv, { from: "user" });
  } catch (err) {
    const code = (err as { code?: string }).code;
    // commander has printed the message (or the help / version) already.
    return code === "commander.helpDisplayed" || code === "commander.version" ? 0 : 2;
  }
  const o = program.opts();
  // Checked after parsing (not as commander's required options) so that a misspelt flag is named as such first.
  const missing = ["minutes", "orgs"].filter((k) => o[k] === undefined);
  if (missing.length > 0) {
    process.stderr.write(`error: ${missing.map((k) => `--${k}`).join(" and ")} must be given, e.g. npm run soak -- --minutes 10 --orgs 100\n`);
    return 2;
  }
  const report = await soak({
    minutes: o.minutes, orgs: o.orgs, faults: o.faults, seed: o.seed, rate: o.rate ?? Math.max(2, o.orgs / 50),
    pollSeconds: o.poll, pageLimit: o.pageLimit, sampleSeconds: o.sample, passConcurrency: o.passConcurrency, consumerNice: o.consumerNice, outDir: o.out, png: o.png,
  });
  process.stdout.write(`${formatSoakReport(report)}\n`);
  return report.passed ? 0 : 1;
}

runAsScript(module, main);
