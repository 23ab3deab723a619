/**
 * `npm run sandbox`: the whole stack on a throwaway PostgreSQL of its own, the demo organization,
 * and the churn generator changing it gently all the time, so that someone writing a loader can
 * test it against an organization that changes under it (docs/api.md). Faults only when asked.
 * Ctrl-C stops everything and removes the data.
 */
import { Command, InvalidArgumentError } from "commander";
import { createPool } from "@exportsvc/db";
import { applyDocument, seedDemo } from "@exportsvc/exportctl";
import { OrgChurn, runChurn } from "./simulate/churn";
import { startCluster } from "./simulate/cluster";
import { FaultInjector, faultSchedule } from "./simulate/faults";
import { runAsScript } from "./lib/run-script";

const number = (min: number, max: number) => (raw: string) => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`expected a number from ${min} to ${max}`);
  return n;
};

const program = new Command("sandbox")
  .description("The stack with the demo organization changing under it (gentle churn; faults off unless asked)")
  .option("--rate <n>", "changes per second", number(0.05, 50), 0.5)
  .option("--seed <n>", "seed of the changes (and faults)", number(0, 2 ** 31 - 1), 1)
  .option("--port <n>", "gateway port", number(1, 65535), Number(process.env.PORT || 8080))
  .option("--faults", "inject faults too (service kills, PostgreSQL restarts, Redis outages, cuts between gateway and export)", false)
  .option("--fault-gap <seconds>", "mean time between faults", number(5, 3600), 60);
program.parse();
const o = program.opts();

/** Runs until SIGINT or SIGTERM; resolves with the exit code once the sandbox has stopped. */
async function main(): Promise<number> {
  const log = (line: string) => process.stderr.write(`sandbox: ${line}\n`);
  const cluster = await startCluster({ log, redis: true, gatewayPort: o.port });
  const keyHashSecret = (cluster.stack as unknown as { keyHashSecret: string }).keyHashSecret;
  const pool = createPool({ connectionString: cluster.databaseUrl, max: 3 });
  const demo = await seedDemo(pool, { keyHashSecret });
  let stopping = false;
  const churn = new OrgChurn(demo.organizationId, o.seed);
  const initial = churn.initial();
  await applyDocument(pool, initial.doc!);
  const churnRun = runChurn(churn, { pool, ratePerSecond: o.rate, shouldStop: () => stopping, log });
  let faultRun: Promise<void> = Promise.resolve();
  if (o.faults) {
    const injector = new FaultInjector(cluster, [], log);
    faultRun = injector.run(faultSchedule(o.seed, 365 * 24 * 3_600_000, o.faultGap * 1000), Date.now(), () => stopping);
  }
  process.stdout.write(
    [
      "",
      "Sandbox is running: the demo organization changes under you.",
      `  Base URL:     ${cluster.stack.baseUrl}`,
      `  Demo API key: ${demo.secret}`,
      `  Churn:        about ${o.rate} changes/s (seed ${o.seed}); faults ${o.faults ? `on, one every ~${o.faultGap} s` : "off (--faults to turn them on)"}`,
      "",
      `  curl -H "Authorization: Bearer ${demo.secret}" ${cluster.stack.baseUrl}/v1/datasets`,
      "",
      "Press Ctrl-C to stop (the sandbox's data is thrown away).",
      "",
    ].join("\n"),
  );
  let stopped!: (code: number) => void;
  const done = new Promise<number>((resolve) => (stopped = resolve));
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    process.stderr.write("\nstopping the sandbox...\n");
    await Promise.race([Promise.all([churnRun, faultRun]), new Promise((r) => setTimeout(r, 10_000))]);
    await pool.end().catch(() => undefined);
    await cluster.close();
    const changes = Object.values(churn.counters.changes).reduce((a, b) => a + b, 0);
    process.stderr.write(`stopped after ${changes} changes\n`);
    stopped(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  return done;
}

runAsScript(module, main, "npm run sandbox");
