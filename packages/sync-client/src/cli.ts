#!/usr/bin/env node
/**
 * dataset-sync: keeps a PostgreSQL or SQLite copy of an organization's datasets current.
 *   sync    one pass, then exit (0: everything synced; 1: some datasets failed; 2: fatal error;
 *           130: stopped by SIGINT/SIGTERM after committing the page in progress)
 *   watch   poll every --interval until SIGINT/SIGTERM (the current page is finished and committed)
 *   status  per dataset: rows, cursor age, last full read, last error
 *   verify  compare the copy with a fresh full export (exit 1 on any difference)
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { ExportApiClient } from "./api/client";
import { ApiError } from "./api/errors";
import { SyncEngine, type RunSummary } from "./engine";
import { jsonReporter, redact, terminalReporter, type Reporter } from "./report";
import { status } from "./status";
import { isTargetUrl, openTarget, redactUrl, type Target } from "./targets";
import { verify, type VerifyResult } from "./verify";

const EXIT = { ok: 0, partial: 1, fatal: 2, usage: 64, interrupted: 130 } as const;

/** 90s, 15m, 24h, 7d, or plain milliseconds. */
export function parseDuration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`not a duration (use e.g. 30s, 15m, 24h, 7d): ${value}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? "ms") as "ms"];
  return Math.round(Number(m[1]) * unit);
}

function intIn(min: number, max: number) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`must be an integer from ${min} to ${max}`);
    return n;
  };
}

interface GlobalOptions {
  baseUrl?: string;
  apiKeyFile?: string;
  target?: string;
  limit: number;
  concurrency: number;
  fullEvery: number;
  datasets?: string;
  json?: boolean;
}

class UsageError extends Error {}

function apiKey(opts: GlobalOptions): string {
  const file = opts.apiKeyFile ?? process.env.EXPORT_API_KEY_FILE;
  if (file) {
    let key: string;
    try {
      key = readFileSync(file, "utf8").trim();
    } catch (err) {
      throw new UsageError(`cannot read the API key file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (!key) throw new UsageError(`the API key file ${file} is empty`);
    return key;
  }
  const key = process.env.EXPORT_API_KEY?.trim();
  if (!key) throw new UsageError("no API key: set EXPORT_API_KEY, EXPORT_API_KEY_FILE or --api-key-file");
  if (!key.startsWith("ak_")) throw new UsageError("EXPORT_API_KEY must be a key secret beginning with ak_");
  return key;
}

function baseUrl(opts: GlobalOptions): string {
  const url = opts.baseUrl ?? process.env.EXPORT_BASE_URL;
  if (!url) throw new UsageError("no service address: set EXPORT_BASE_URL or --base-url");
  if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`EXPORT_BASE_URL must be an http(s) URL (got ${redactUrl(url)})`);
  return url;
}

function targetUrl(opts: GlobalOptions): string {
  const url = opts.target ?? process.env.SYNC_TARGET;
  if (!url) throw new UsageError("no target: set SYNC_TARGET or --target (postgres://…, sqlite:<file> or duckdb:<file>)");
  if (!isTargetUrl(url)) throw new UsageError(`SYNC_TARGET must be a postgres://, sqlite: or duckdb: URL (got ${redactUrl(url)})`);
  return url;
}

function reporterFor(opts: GlobalOptions): Reporter {
  return opts.json || !process.stderr.isTTY ? jsonReporter() : terminalReporter();
}

function summaryText(s: RunSummary): string {
  if (s.listing === "not-modified") return "listing unchanged (304): nothing to sync";
  const parts = [`${s.synced.length} synced`, `${s.skipped.length} unchanged`, `${s.failed.length} failed`, `${s.rows} rows`, `${s.deleted} deleted`, `${s.seconds.toFixed(1)} s`];
  if (s.retired.length) parts.push(`retired: ${s.retired.join(", ")}`);
  const failed = s.failed.map((f) => `\n  ${f.dataset}: ${f.errorCode ?? ""} ${f.message}`).join("");
  return `${s.stopped ? "stopped: " : ""}${parts.join(", ")}${failed}`;
}

async function withTarget<T>(opts: GlobalOptions, writer: boolean, work: (target: Target) => Promise<T>): Promise<T> {
  const target = openTarget(targetUrl(opts), { concurrency: opts.concurrency });
  try {
    await target.open({ writer });
    return await work(target);
  } finally {
    await target.close();
  }
}

function makeEngine(opts: GlobalOptions, target: Target, reporter: Reporter, signal?: AbortSignal) {
  const client = new ExportApiClient({
    baseUrl: baseUrl(opts),
    apiKey: apiKey(opts),
    signal,
    onRetry: (r) => reporter.record("retry", { ...r }, `${r.request}: HTTP ${r.status ?? "network error"} ${r.errorCode ?? ""}, retrying in ${r.delayMs} ms`),
  });
  const engine = new SyncEngine(client, target, {
    limit: opts.limit,
    concurrency: opts.concurrency,
    fullEveryMs: opts.fullEvery,
    only: opts.datasets?.split(",").map((s) => s.trim()).filter(Boolean),
    signal,
    onEvent: (e) => reporter.event(e),
  });
  return { client, engine };
}

/** SIGINT/SIGTERM: finish the current page, commit, stop. A second signal exits at once. */
function stopSignal(reporter: Reporter): AbortController {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(130);
    reporter.record("signal", { signal: sig }, `${sig}: finishing the current page, then stopping`);
    controller.abort(new Error(sig));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return controller;
}

export function buildProgram(): Command {
  const program = new Command("dataset-sync")
    // Commander reports usage errors itself; main() turns them into exit code 64, not commander's 1.
    .exitOverride()
    .description("Keep a PostgreSQL, SQLite or DuckDB copy of an organization's export datasets current")
    .option("--base-url <url>", "service address (env EXPORT_BASE_URL)")
    .option("--api-key-file <path>", "file holding the API key secret (env EXPORT_API_KEY_FILE; or the key itself in EXPORT_API_KEY)")
    .option("--target <url>", "postgres://…, sqlite:<file> or duckdb:<file> (env SYNC_TARGET)")
    .addOption(new Option("--limit <rows>", "rows per CSV request, 1 to 5000").default(5000).argParser(intIn(1, 5000)))
    .addOption(new Option("--concurrency <n>", "datasets synced at once (one request in flight each), up to 5").default(1).argParser(intIn(1, 5)))
    .addOption(new Option("--full-every <duration>", "re-read each dataset in full and sweep deletions this often").default(parseDuration("24h"), "24h").argParser(parseDuration))
    .option("--datasets <keys>", "comma-separated dataset keys (default: all)")
    .option("--json", "JSON lines even on a terminal")
    .showHelpAfterError();

  program
    .command("sync")
    .description("sync once, print a summary, exit 0 (all synced), 1 (some datasets failed) or 2 (fatal)")
    .action(async (_o, cmd: Command) => {
      const opts = cmd.optsWithGlobals() as GlobalOptions;
      const reporter = reporterFor(opts);
      const controller = stopSignal(reporter);
      await withTarget(opts, true, async (target) => {
        const { client, engine } = makeEngine(opts, target, reporter, controller.signal);
        try {
          const summary = await engine.runOnce();
          reporter.record("summary", { ...summary }, summaryText(summary));
          process.exitCode = summary.stopped ? EXIT.interrupted : summary.failed.length ? EXIT.partial : EXIT.ok;
        } finally {
          await client.close();
        }
      });
      reporter.close();
    });

  program
    .command("watch")
    .description("poll the listing every --interval and sync what moved, until SIGINT/SIGTERM")
    .addOption(new Option("--interval <duration>", "time between polls").default(parseDuration("60s"), "60s").argParser(parseDuration))
    .action(async (o: { interval: number }, cmd: Command) => {
      const opts = cmd.optsWithGlobals() as GlobalOptions;
      const reporter = reporterFor(opts);
      const controller = stopSignal(reporter);
      // The target may be briefly unreachable: open it with retries, like every later round.
      for (;;) {
        try {
          await withTarget(opts, true, async (target) => {
            const { client, engine } = makeEngine(opts, target, reporter, controller.signal);
            try {
              await engine.watch(o.interval, (result) => {
                if (result instanceof Error) reporter.record("run-error", { message: result.message }, `run failed: ${result.message}`);
                else reporter.record("summary", { ...result }, summaryText(result));
              });
            } finally {
              await client.close();
            }
          });
          break;
        } catch (err) {
          if (err instanceof ApiError || err instanceof UsageError || controller.signal.aborted) throw err;
          reporter.record("run-error", { message: (err as Error).message }, `target error: ${(err as Error).message}; retrying`);
          await new Promise((r) => setTimeout(r, Math.min(o.interval, 10_000)));
        }
      }
      reporter.close();
    });

  program
    .command("status")
    .description("per dataset: rows, cursor age, last full read, last error (from the target's sync state)")
    .action(async (_o, cmd: Command) => {
      const opts = cmd.optsWithGlobals() as GlobalOptions;
      await withTarget(opts, false, async (target) => {
        const s = await status(target);
        if (opts.json || !process.stdout.isTTY) {
          for (const d of s.datasets) process.stdout.write(redact(JSON.stringify({ event: "status", ...d })) + "\n");
          return;
        }
        const rows = s.datasets.map((d) => ({
          dataset: d.dataset,
          rows: d.rows ?? "-",
          state: d.retiredAt ? "retired" : d.inProgress ? `${d.phase} (in progress)` : d.phase,
          "cursor age": d.cursorAgeSeconds === null ? "-" : `${d.cursorAgeSeconds}s`,
          "last full read": d.lastFullReadAt ?? "-",
          "last error": d.lastError ? redact(d.lastError).slice(0, 80) : "",
        }));
        console.table(rows);
      });
    });

  program
    .command("verify")
    .description("compare the copy with a fresh full export, row by row and every value; exit 1 on any difference")
    .action(async (_o, cmd: Command) => {
      const opts = cmd.optsWithGlobals() as GlobalOptions;
      const json = opts.json || !process.stdout.isTTY;
      await withTarget(opts, false, async (target) => {
        const client = new ExportApiClient({ baseUrl: baseUrl(opts), apiKey: apiKey(opts) });
        try {
          const results = await verify(client, target, {
            only: opts.datasets?.split(",").map((s) => s.trim()).filter(Boolean),
            onResult: (r) => process.stdout.write(json ? JSON.stringify({ event: "verify", ...r }) + "\n" : describeVerifyResult(r)),
          });
          const diffs = results.filter((r) => !r.ok).length;
          process.stdout.write(json ? JSON.stringify({ event: "verify-summary", datasets: results.length, differences: diffs }) + "\n" : `${results.length} datasets, ${diffs} differ\n`);
          process.exitCode = diffs ? EXIT.partial : EXIT.ok;
        } finally {
          await client.close();
        }
      });
    });
  return program;
}

/** One dataset's verify result for a terminal: a line, and the differences it found indented below. */
function describeVerifyResult(r: VerifyResult): string {
  if (r.problem) return `DIFF ${r.dataset}: ${r.problem}\n`;
  const line = `${r.ok ? "ok  " : "DIFF"} ${r.dataset}: source ${r.source.rows} rows, copy ${r.copy ? `${r.copy.rows} rows` : "no table"}`;
  if (r.ok || !r.copy) return `${line}\n`;
  const counts = [
    [r.missing, "missing"],
    [r.extra, "extra"],
    [r.changed, "changed"],
    [r.duplicated, "duplicated in the export"],
  ]
    .filter(([n]) => Number(n) > 0)
    .map(([n, what]) => `${n} ${what}`);
  if (r.missingColumns.length) counts.push(`columns not in the copy: ${r.missingColumns.join(", ")}`);
  return [`${line} (${counts.join("; ")})`, ...r.examples.map((e) => `       ${e}`)].join("\n") + "\n";
}

export async function main(argv = process.argv): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Already printed by commander (help, version, or what was wrong with the command line).
      process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.usage;
      return;
    }
    const usage = err instanceof UsageError;
    const message = redact((err as Error).message ?? String(err));
    if (process.stderr.isTTY) process.stderr.write(`dataset-sync: ${message}\n`);
    else process.stderr.write(JSON.stringify({ event: "fatal", message, errorCode: err instanceof ApiError ? err.errorCode : undefined }) + "\n");
    process.exitCode = usage ? EXIT.usage : EXIT.fatal;
  }
}

if (require.main === module) void main();
