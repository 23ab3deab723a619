import { resolve } from "node:path";
import { DuckDBTarget } from "./duckdb";
import { PostgresTarget } from "./postgres";
import { redactUrl } from "./sql";
import type { Target } from "./target";

export type { Target, TablePlan } from "./target";
export type { SqliteTarget } from "./sqlite";
export { DuckDBTarget };
export { PostgresTarget, redactUrl };

/**
 * better-sqlite3 is an optional dependency (a native module): it is loaded only for a sqlite:
 * target, so a PostgreSQL-only installation works where it could not be built.
 */
function sqliteTarget(file: string): Target {
  let mod: typeof import("./sqlite");
  try {
    mod = require("./sqlite") as typeof import("./sqlite");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND" && /better-sqlite3/.test((err as Error).message)) {
      throw new Error("sqlite: targets need the optional dependency better-sqlite3 (npm install better-sqlite3; it builds with python3, make and a C++ compiler where no prebuilt binary can be downloaded)");
    }
    throw err;
  }
  return new mod.SqliteTarget(file);
}

/** The target URL forms (SYNC_TARGET): `postgres://…`, `sqlite:<path>`, `duckdb:<path>`. */
export const isTargetUrl = (url: string) => /^postgres(ql)?:\/\//.test(url) || url.startsWith("sqlite:") || url.startsWith("duckdb:");

/**
 * `postgres://…` / `postgresql://…`, `sqlite:<path>` (also `sqlite://<path>`, `sqlite:///abs/path`)
 * or `duckdb:<path>` (same forms). @duckdb/node-api, an optional peer like better-sqlite3, is
 * loaded when a duckdb: target opens.
 */
export function openTarget(url: string, opts: { concurrency?: number } = {}): Target {
  if (/^postgres(ql)?:\/\//.test(url)) return new PostgresTarget(url, Math.max(2, (opts.concurrency ?? 1) + 2));
  if (url.startsWith("sqlite:")) {
    const path = url.replace(/^sqlite:(\/\/)?/, "");
    if (!path) throw new Error("SYNC_TARGET sqlite: needs a file path, e.g. sqlite:./copy.db");
    return sqliteTarget(path === ":memory:" ? path : resolve(path));
  }
  if (url.startsWith("duckdb:")) {
    const path = url.replace(/^duckdb:(\/\/)?/, "");
    if (!path) throw new Error("SYNC_TARGET duckdb: needs a file path, e.g. duckdb:./copy.duckdb");
    return new DuckDBTarget(path === ":memory:" ? path : resolve(path));
  }
  throw new Error(`SYNC_TARGET must be a postgres://, sqlite: or duckdb: URL (got ${redactUrl(url)})`);
}
