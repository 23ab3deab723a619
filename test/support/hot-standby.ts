/**
 * A real PostgreSQL 15 primary and streaming hot standby on private ports and temporary directories
 * (initdb, pg_basebackup), for tests of DATABASE_READ_URL (export and catalog).
 * `hotStandbyAvailable` is false where the binaries are missing.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "pg";
import { migrate } from "@exportsvc/db";
import { freePort } from "./ports";

const BIN = "/usr/lib/postgresql/15/bin";
export const hotStandbyAvailable = existsSync(join(BIN, "initdb")) && existsSync(join(BIN, "pg_basebackup"));
const asRoot = process.getuid?.() === 0;

function pgBin(tool: string, args: string[]): void {
  const [cmd, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(BIN, tool), ...args]] : [join(BIN, tool), args];
  execFileSync(cmd, argv, { stdio: "pipe" });
}

function ownedTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (asRoot) execFileSync("chown", ["postgres", dir]);
  else chownSync(dir, process.getuid!(), process.getgid!());
  return dir;
}

const serverOptions = (port: number) => `-p ${port} -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=40 -c fsync=off`;

export interface HotStandby {
  primaryUrl: string;
  standbyUrl: string;
  primary: Pool;
  standby: Pool;
  /** Waits until the standby has replayed everything the primary has written so far. */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts both servers, migrates the primary and waits for the standby to replay the migrations. */
export async function startHotStandby(applicationName: string): Promise<HotStandby> {
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const primaryDir = join(ownedTempDir("hs-primary-"), "data");
  const standbyDir = join(ownedTempDir("hs-standby-"), "data");
  const dirs = [primaryDir, standbyDir];
  pgBin("initdb", ["-D", primaryDir, "-U", "postgres", "-A", "trust", "--locale=C", "--encoding=UTF8"]);
  pgBin("pg_ctl", ["-D", primaryDir, "-o", serverOptions(primaryPort), "-l", join(primaryDir, "..", "log"), "-w", "start"]);
  const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
  pgBin("pg_basebackup", ["-h", "127.0.0.1", "-p", String(primaryPort), "-U", "postgres", "-D", standbyDir, "-R", "-X", "stream"]);
  pgBin("pg_ctl", ["-D", standbyDir, "-o", `${serverOptions(standbyPort)} -c hot_standby=on`, "-l", join(standbyDir, "..", "log"), "-w", "start"]);
  const standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/postgres`;
  const primary = new Pool({ connectionString: primaryUrl, max: 3, application_name: applicationName });
  const standby = new Pool({ connectionString: standbyUrl, max: 3, application_name: applicationName });
  const caughtUp = async () => {
    const lsn = (await primary.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn")).rows[0].lsn;
    for (let i = 0; i < 600; i++) {
      if ((await standby.query<{ ok: boolean }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok", [lsn])).rows[0].ok) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("the standby did not catch up within 30 s");
  };
  await migrate(primary);
  await caughtUp();
  return {
    primaryUrl,
    standbyUrl,
    primary,
    standby,
    caughtUp,
    stop: async () => {
      await primary.end();
      await standby.end();
      for (const dir of [...dirs].reverse()) {
        try {
          pgBin("pg_ctl", ["-D", dir, "-m", "immediate", "-w", "stop"]);
        } catch {
          // not running
        }
        rmSync(join(dir, ".."), { recursive: true, force: true });
      }
    },
  };
}
