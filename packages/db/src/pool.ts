import { Pool, type PoolConfig } from "pg";

/**
 * Every connection runs with the session settings that make PostgreSQL's text forms the API's
 * value forms: UTC instants as `YYYY-MM-DD HH:MM:SS[.ffffff]+00`, ISO dates.
 */
export const SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=1";

export interface PoolOptions {
  connectionString: string;
  max?: number;
  applicationName?: string;
  statementTimeoutMs?: number;
  /** Close and replace a connection after this many checkouts (0 or unset: never). */
  maxUses?: number;
}

export function createPool(opts: PoolOptions): Pool {
  const config: PoolConfig = {
    connectionString: opts.connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName,
    options: SESSION_OPTIONS + (opts.statementTimeoutMs ? ` -c statement_timeout=${opts.statementTimeoutMs}` : ""),
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
    ...(opts.maxUses ? { maxUses: opts.maxUses } : {}),
  };
  const pool = new Pool(config);
  // An idle client losing its connection must not crash the process; the next query reports it.
  pool.on("error", () => undefined);
  // Nor a client checked out and between two queries (e.g. inside a transaction) when PostgreSQL
  // shuts its connection down: pg emits 'error' on the client, which would be unhandled. Its next
  // query fails instead (found by the churn simulator, seed 2: restart-postgres killed the schema service).
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

/** True for errors that mean "the database could not be reached or the operation could not run". */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (!e) return false;
  if (typeof e.code === "string") {
    // Connection exceptions (08), insufficient resources (53), operator intervention (57), system errors (58).
    if (/^(08|53|57|58)/.test(e.code)) return true;
    if (["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EPIPE", "EHOSTUNREACH"].includes(e.code)) return true;
  }
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(e.message ?? "");
}

/** A round trip to the database (`SELECT 1`): what a readiness probe asks of it. */
export async function pingDatabase(pool: Pick<Pool, "query">): Promise<void> {
  await pool.query("SELECT 1");
}
