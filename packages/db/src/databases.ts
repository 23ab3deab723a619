import { Client } from "pg";

const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The URL of database `name` on the server `serverUrl` points at (same credentials and options). */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function onServer(serverUrl: string, statements: string[]): Promise<void> {
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    for (const statement of statements) await admin.query(statement);
  } finally {
    await admin.end();
  }
}

function checkedName(name: string): string {
  // Names are written into the statement: tests, benches and tools make them, never users.
  if (!DATABASE_NAME.test(name)) throw new Error(`not a plain database name: ${JSON.stringify(name)}`);
  return name;
}

/**
 * Creates database `name` on the server `serverUrl` points at (the tests', benches' and tools' own
 * databases) and returns its URL; `replace` drops one of that name first.
 */
export async function createDatabase(serverUrl: string, name: string, opts: { replace?: boolean } = {}): Promise<string> {
  const db = checkedName(name);
  await onServer(serverUrl, [...(opts.replace ? [`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`] : []), `CREATE DATABASE ${db}`]);
  return databaseUrl(serverUrl, db);
}

/** Drops database `name` (if it exists) on the server `serverUrl` points at, closing its sessions. */
export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  await onServer(serverUrl, [`DROP DATABASE IF EXISTS ${checkedName(name)} WITH (FORCE)`]);
}

/** Whether database `name` exists on the server `serverUrl` points at. */
export async function databaseExists(serverUrl: string, name: string): Promise<boolean> {
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    return ((await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount ?? 0) > 0;
  } finally {
    await admin.end();
  }
}
