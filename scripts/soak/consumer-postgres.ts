import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { setPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase, startEmbeddedPostgres } from "@exportsvc/db";
import { freePort } from "../../test/support/ports";

/**
 * The consumers' own PostgreSQL: where the soak's copies live. In production a consumer's copy is
 * on the consumer's machine, not on the service's database server; sharing one server would put
 * every copy's writes (WAL, checkpoints, shared buffers, CPU) into the service's latency. So the
 * copies get a server of their own, and on a machine that runs both sides its processes run at a
 * lower CPU priority (`nice`), standing in for the consumers' machines (docs/soak.md, "Two sides
 * on one machine").
 */
export interface ConsumerPostgres {
  /** A new database for one copy; its URL. */
  createDatabase(name: string): Promise<string>;
  close(): Promise<void>;
}

export async function startConsumerPostgres(opts: { niceness: number; maxConnections: number; log: (line: string) => void }): Promise<ConsumerPostgres> {
  const dataDir = mkdtempSync(join(tmpdir(), "exportsvc-soak-copies-"));
  chmodSync(dataDir, 0o755);
  const port = await freePort();
  const pg = await startEmbeddedPostgres(join(dataDir, "pg"), port, "copies", { postgresFlags: ["-c", `max_connections=${opts.maxConnections}`] });
  const adminUrl = pg.url.replace(/\/copies$/, "/postgres");
  if (opts.niceness > 0) {
    const postmaster = Number(readFileSync(join(pg.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    // Backends fork from the postmaster and keep its niceness; its running helpers are reniced with it.
    try {
      setPriority(postmaster, opts.niceness);
      for (const pid of childrenOf(postmaster)) {
        try {
          setPriority(pid, opts.niceness);
        } catch (err) {
          // A backend or helper that exited since it was listed (ESRCH) needs no priority.
          if ((err as { info?: { code?: string } }).info?.code !== "ESRCH") throw err;
        }
      }
    } catch (err) {
      await pg.stop().catch(() => undefined);
      throw new Error(`could not set the consumers' PostgreSQL to nice ${opts.niceness} (--consumer-nice 0 runs it as the service's): ${(err as Error).message}`);
    }
  }
  opts.log(`the consumers' PostgreSQL on port ${port} (copies; nice ${opts.niceness}; data in ${dataDir})`);
  return {
    createDatabase: (name) => createDatabase(adminUrl, name, { replace: true }),
    async close() {
      await pg.stop().catch(() => undefined);
      if (!process.env.SIM_KEEP_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The pids whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The field after the parenthesized command name: state, then the parent's pid.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}
