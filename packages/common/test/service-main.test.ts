import { spawn } from "node:child_process";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..", "..");
const FIXTURE = join(__dirname, "fixtures", "run-service-process.ts");
const TRACING = join(__dirname, "fixtures", "tracing.ts");
// Each run starts a TypeScript process; on a busy 2-core machine that takes seconds.
const CHILD_PROCESS_TIMEOUT = 120_000;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the fixture as services run (`node --import <tracing> main`, through tsx), or without the
 * tracing preload; once it logs that it is ready, sends `signal` (if any; several 100 ms apart).
 */
function runFixture(mode: string, signal?: NodeJS.Signals | NodeJS.Signals[], preload = true): Promise<Outcome> {
  const env: NodeJS.ProcessEnv = { ...process.env, RUN_SERVICE_FIXTURE: mode, OTEL_TRACES_EXPORTER: "console", OTEL_SERVICE_NAME: "" };
  const args = ["--import", "tsx", ...(preload ? ["--import", TRACING] : []), FIXTURE];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env });
    let stdout = "";
    let stderr = "";
    let waitingForStop = false;
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      // The first signal once the service is ready; each further one once the stop has begun (it is
      // logged), so a second signal always lands during the stop however slowly the child runs.
      const signals = [signal ?? []].flat();
      if (signals.length > 0 && stdout.includes("fixture ready")) {
        child.kill(signals[0]);
        signal = signals.length > 1 ? signals.slice(1) : undefined;
        if (signal) waitingForStop = true;
      }
    });
    child.stdout.on("data", () => {
      if (waitingForStop && stdout.includes('"msg":"stopping"')) {
        waitingForStop = false;
        for (const s of [signal ?? []].flat()) child.kill(s);
        signal = undefined;
      }
    });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const logMessages = (stdout: string): string[] =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith('{"level"'))
    .map((line) => (JSON.parse(line) as { msg: string }).msg);

describe("runService", () => {
  it(
    "runs with tracing preloaded before configuration and the service, and exits 0 after a graceful stop on SIGTERM",
    async () => {
      const { code, stdout } = await runFixture("normal", "SIGTERM");
      expect(stdout).toContain("config: tracing loaded=true");
      expect(stdout).toContain("start: tracing loaded=true");
      expect(stdout).toContain("service stopped");
      expect(logMessages(stdout)).toEqual(["fixture ready", "stopping"]);
      expect(code).toBe(0);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "without the tracing preload, runs untraced and says so",
    async () => {
      const { code, stdout } = await runFixture("normal", "SIGTERM", false);
      expect(stdout).toContain("start: tracing loaded=false");
      expect(logMessages(stdout)).toEqual([expect.stringContaining("tracing was not preloaded"), "fixture ready", "stopping"]);
      expect(code).toBe(0);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "stops on SIGINT too",
    async () => {
      const { code, stdout } = await runFixture("normal", "SIGINT");
      expect(stdout).toContain("service stopped");
      expect(code).toBe(0);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "stops once when a second signal arrives during the stop (Ctrl-C reaches the process group, then the parent's SIGTERM)",
    async () => {
      const { code, stdout, stderr } = await runFixture("slow-stop", ["SIGINT", "SIGTERM"]);
      expect(stdout.split("\n").filter((line) => line === "service stopped")).toHaveLength(1);
      expect(logMessages(stdout)).toEqual(["fixture ready", "stopping"]);
      expect(stderr).toBe("");
      expect(code).toBe(0);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "exits 1 and logs when the stop fails",
    async () => {
      const { code, stdout } = await runFixture("failing-stop", "SIGTERM");
      expect(logMessages(stdout)).toEqual(["fixture ready", "stopping", "unclean stop"]);
      expect(code).toBe(1);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "writes every line before exiting, in order, even when a line's write is still queued behind a busy thread pool",
    async () => {
      const { code, stdout } = await runFixture("failing-stop-busy-pool", "SIGTERM");
      expect(logMessages(stdout)).toEqual(["fixture ready", "stopping", "unclean stop"]);
      expect(code).toBe(1);
    },
    CHILD_PROCESS_TIMEOUT,
  );

  it(
    "fails fast on bad configuration, naming the variable, before anything starts",
    async () => {
      const { code, stdout, stderr } = await runFixture("bad-config");
      expect(stderr).toContain("Invalid configuration:");
      expect(stderr).toContain("DATABASE_URL");
      expect(stderr).not.toContain("    at ");
      expect(stdout).not.toContain("start:");
      expect(code).toBe(1);
    },
    CHILD_PROCESS_TIMEOUT,
  );
});
