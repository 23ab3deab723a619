import { resolve } from "node:path";
import { PostgresTarget } from "./postgres";
import { redactUrl } from "./sql";
import type { Target } from "./target";

export type { Target, TablePlan } from "./target";
export type { SqliteTarget } from "./sqlite";
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

/** `postgres://…` / `postgresql://…` or `sqlite:<path>` (also `sqlite://<path>`, `sqlite:///abs/path`). */
export function openTarget(url: string, opts: { concurrency?: number } = {}): Target {
  if (/^postgres(ql)?:\/\//.test(url)) return new PostgresTarget(url, Math.max(2, (opts.concurrency ?? 1) + 2));
  if (url.startsWith("sqlite:")) {
    const path = url.replace(/^sqlite:(\/\/)?/, "");
    if (!path) throw new Error("SYNC_TARGET sqlite: needs a file path, e.g. sqlite:./copy.db");
    return sqliteTarget(path === ":memory:" ? path : resolve(path));
  }
  throw new Error(`SYNC_TARGET must be a postgres:// or sqlite: URL (got ${redactUrl(url)})`);
}
