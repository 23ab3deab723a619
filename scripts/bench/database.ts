/**
 * The benches' own database: a fresh one on DATABASE_URL's server (or BENCH_DATABASE_URL as is, where
 * a bench offers it), dropped at the end unless BENCH_KEEP=1.
 */
import type { Pool } from "pg";
import { createDatabase, createPool, databaseExists, databaseUrl, dropDatabase } from "@exportsvc/db";

/** The server the bench databases are created on. */
export const adminUrl = (): string => process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres";

export interface BenchDatabase {
  url: string;
  /** Drops the database (a no-op when it is kept or was given by BENCH_DATABASE_URL). */
  drop(): Promise<void>;
}

export interface ProvisionOptions {
  /** Use BENCH_DATABASE_URL as is when it is set (never dropped). Default false. */
  benchDatabaseUrl?: boolean;
  /** Reuse the database when it exists already instead of recreating it. Default false: dropped and created afresh. */
  reuse?: boolean;
  /** Leave the database at the end. Default: BENCH_KEEP=1. */
  keep?: boolean;
}

/** Provisions the database `name` (a trusted identifier) on DATABASE_URL's server. */
export async function provisionDatabase(name: string, options: ProvisionOptions = {}): Promise<BenchDatabase> {
  if (options.benchDatabaseUrl && process.env.BENCH_DATABASE_URL) return { url: process.env.BENCH_DATABASE_URL, drop: async () => undefined };
  const server = adminUrl();
  const url = options.reuse && (await databaseExists(server, name)) ? databaseUrl(server, name) : await createDatabase(server, name, { replace: true });
  const keep = options.keep ?? process.env.BENCH_KEEP === "1";
  return {
    url,
    drop: async () => {
      if (!keep) await dropDatabase(server, name);
    },
  };
}

/**
 * A bench's database, BENCH_DATABASE_NAME (default `defaultName`) created afresh, with a pool of 4 on
 * it; `close` ends the pool and drops the database (stop what runs on it first).
 */
export async function openBenchDatabase(defaultName: string): Promise<{ db: BenchDatabase; pool: Pool; close(): Promise<void> }> {
  const databaseName = process.env.BENCH_DATABASE_NAME || defaultName;
  if (!/^[a-z_][a-z0-9_]*$/.test(databaseName)) throw new Error("BENCH_DATABASE_NAME must be a lower-case SQL identifier");
  const db = await provisionDatabase(databaseName);
  const pool = createPool({ connectionString: db.url, max: 4, applicationName: "exportsvc-bench" });
  pool.on("error", () => undefined);
  const close = async () => {
    await pool.end();
    await db.drop();
  };
  return { db, pool, close };
}

/**
 * `orgs` export-enabled organizations, each with one site, ids from md5 of `<prefix>org<g>` (sites:
 * `<prefix>site<organization id>`) so that a re-run makes the same fleet; named `<name> <g>`.
 */
export async function seedOrganizationsWithSites(pool: { query(sql: string, values?: unknown[]): Promise<unknown> }, orgs: number, prefix: string, name: string): Promise<void> {
  await pool.query(`INSERT INTO organizations (id, name) SELECT md5($2::text || 'org' || g)::uuid, $3::text || ' ' || g FROM generate_series(1, $1) g`, [orgs, prefix, name]);
  await pool.query(`INSERT INTO export_organizations (organization_id, export_enabled) SELECT id, true FROM organizations`);
  await pool.query(
    `INSERT INTO sites (organization_id, id, name, time_zone, path)
     SELECT id, md5($1::text || 'site' || id)::uuid, 'Main', 'Europe/Oslo', md5($1::text || 'site' || id)::uuid::text FROM organizations`,
    [prefix],
  );
}
