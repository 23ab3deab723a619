import { Client } from "pg";

/** The PostgreSQL server the target tests use: DATABASE_URL (default the local one). */
export const SERVER = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres";

/** One statement on its own connection (creating and dropping a test's database, clearing it), returning its rows. */
export async function onItsOwnConnection(connectionString: string, sql: string): Promise<Record<string, unknown>[]> {
  const c = new Client({ connectionString });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

/** The URL of `database` on SERVER. */
export function databaseUrl(database: string): string {
  const url = new URL(SERVER);
  url.pathname = `/${database}`;
  return url.toString();
}
