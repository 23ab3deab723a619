import { spawn } from "node:child_process";
import { join } from "node:path";
import { testDatabaseUrl } from "../../../../test/support/db";

export const ROOT = join(__dirname, "..", "..", "..", "..");
const CLI = join(ROOT, "packages", "exportctl", "src", "cli.ts");
// What `npx tsx` runs, without npm's own start-up on every call.
const TSX = join(ROOT, "node_modules", ".bin", "tsx");
/** Each call starts a TypeScript process; on a busy 2-core machine that takes seconds. */
export const CHILD_PROCESS_TIMEOUT = 240_000;

export interface ExportctlRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * exportctl as an operator runs it: a real process against the test database. `env` entries set to
 * undefined are removed from the child's environment.
 */
export function runExportctl(args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}): Promise<ExportctlRun> {
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: testDatabaseUrl(), ...opts.env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [CLI, ...args], { cwd: ROOT, env: env as NodeJS.ProcessEnv });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? "");
  });
}
