/**
 * `npm run simulate`: churn + faults + a consumer, then the verdict (docs/simulation.md).
 * Exit code: 0 when nothing was lost, duplicated, stale or extra; 1 otherwise; 2 on a usage error.
 */
import { Command, InvalidArgumentError, Option } from "commander";
import { FAULT_KINDS, type FaultKind } from "./simulate/faults";
import { formatReport, simulate } from "./simulate/run";

const number = (min: number, max: number, integer = false) => (raw: string) => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new InvalidArgumentError(`expected ${integer ? "an integer" : "a number"} from ${min} to ${max}`);
  }
  return n;
};

const program = new Command("simulate")
  .description("Churn a live organization, inject faults, keep a copy synced, and check that it converges")
  .option("--seed <n>", "seed of the changes and of the fault schedule", number(0, 2 ** 31 - 1, true), 1)
  .option("--minutes <n>", "length of the churn (fractions allowed)", number(0.1, 24 * 60), 1)
  .option("--rate <n>", "changes per second, over all organizations", number(0.1, 200), 2)
  .option("--orgs <n>", "organizations churned at once", number(1, 20, true), 1)
  .option("--no-faults", "no fault injection")
  .addOption(new Option("--fault-kinds <list>", `comma-separated subset of: ${FAULT_KINDS.join(", ")}`))
  .option("--fault-gap <seconds>", "mean time between faults", number(1, 3600), 8)
  .addOption(new Option("--consumer <kind>", "the consumer under test").choices(["minimal", "sync-client"]).default("sync-client"))
  .option("--page-limit <n>", "limit of the consumer's pages", number(1, 5000, true), 200)
  .option("--out <dir>", "where report.json and lag-and-faults.png go", "simulation-out")
  .option("--no-plot", "skip the PNG");

program.parse();
const o = program.opts();
let faultKinds: FaultKind[] | undefined;
if (o.faultKinds) {
  faultKinds = String(o.faultKinds).split(",").map((s) => s.trim()) as FaultKind[];
  const unknown = faultKinds.filter((k) => !FAULT_KINDS.includes(k));
  if (unknown.length > 0) {
    process.stderr.write(`--fault-kinds: unknown ${unknown.join(", ")}; known: ${FAULT_KINDS.join(", ")}\n`);
    process.exit(2);
  }
}

simulate({
  seed: o.seed, minutes: o.minutes, rate: o.rate, orgs: o.orgs, faults: o.faults, faultKinds, faultGapSeconds: o.faultGap,
  consumer: o.consumer, pageLimit: o.pageLimit, outDir: o.out, plot: o.plot,
}).then(
  (report) => {
    process.stdout.write(`${formatReport(report)}\n`);
    process.exit(report.passed ? 0 : 1);
  },
  (err) => {
    process.stderr.write(`simulate failed: ${(err as Error).stack ?? err}\n`);
    process.exit(2);
  },
);
