/**
 * Helpers for the sync client's end-to-end tests: throwaway target databases (a PostgreSQL
 * database on the run's server, or a SQLite file), the client run in-process or as the CLI process,
 * and the copy read back as export text for comparison with the source.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "../../support/linked/better-sqlite3";
import Database from "better-sqlite3";
import { DuckDBInstance } from "@duckdb/node-api";
import { Client } from "pg";
import { createDatabase, dropDatabase } from "@exportsvc/db";
import { ExportApiClient, SyncEngine, openTarget, type RunSummary, type SyncOptions, type Target } from "../../../packages/sync-client/src";
import type { Row } from "../../support/forms";

const ROOT = join(__dirname, "..", "..", "..");
export const CLI = join(ROOT, "packages", "sync-client", "src", "cli.ts");

export interface TargetDb {
  url: string;
  kind: "postgres" | "sqlite" | "duckdb";
  drop(): Promise<void>;
}

/** Every target the sync client writes: each suite's loader rules run against all of them. */
export const TARGET_KINDS = ["postgres", "sqlite", "duckdb"] as const;

export function newTarget(kind: TargetDb["kind"]): Promise<TargetDb> {
  return kind === "postgres" ? newPostgresTarget() : kind === "sqlite" ? newSqliteTarget() : newDuckdbTarget();
}

export async function newPostgresTarget(): Promise<TargetDb> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL;
  if (!admin) throw new Error("TEST_ADMIN_DATABASE_URL is not set: run through jest (global-setup)");
  const name = `sync_copy_${process.pid}_${randomBytes(4).toString("hex")}`;
  return { url: await createDatabase(admin, name), kind: "postgres", drop: () => dropDatabase(admin, name) };
}

export async function newSqliteTarget(): Promise<TargetDb> {
  const dir = mkdtempSync(join(tmpdir(), "sync-copy-"));
  return { url: `sqlite:${join(dir, "copy.db")}`, kind: "sqlite", drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

export async function newDuckdbTarget(): Promise<TargetDb> {
  const dir = mkdtempSync(join(tmpdir(), "sync-copy-"));
  return { url: `duckdb:${join(dir, "copy.duckdb")}`, kind: "duckdb", drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** Runs statements on a DuckDB copy (no sync may hold the file meanwhile); returns the last statement's rows. */
async function onDuckdb(db: TargetDb, sql: string): Promise<Array<Record<string, unknown>>> {
  const instance = await DuckDBInstance.create(db.url.replace(/^duckdb:/, ""));
  const conn = await instance.connect();
  try {
    await conn.run("SET TimeZone = 'UTC'");
    return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Array<Record<string, unknown>>;
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

/** Counts the requests the engine makes. */
export class CountingClient extends ExportApiClient {
  listings = 0;
  pages = 0;
  /** The cursor of each CSV request, in order. */
  cursors: Array<string | null> = [];
  retries: Array<{ status?: number; errorCode?: string; delayMs: number }> = [];
  /** Awaited before each CSV request (a test changing the source mid-sync). */
  beforePage?: (cursor: string | null) => Promise<void>;
  override listing(etag?: string) {
    this.listings++;
    return super.listing(etag);
  }
  override async openPage(...args: Parameters<ExportApiClient["openPage"]>) {
    this.pages++;
    this.cursors.push(args[1].cursor ?? null);
    await this.beforePage?.(args[1].cursor ?? null);
    return super.openPage(...args);
  }
}

/** One in-process sync pass. */
export async function syncOnce(
  baseUrl: string,
  apiKey: string,
  targetUrl: string,
  opts: SyncOptions & { retry?: Record<string, number>; beforePage?: CountingClient["beforePage"] } = {},
) {
  const client: CountingClient = new CountingClient({
    baseUrl,
    apiKey,
    retry: { baseDelayMs: 50, maxDelayMs: 500, ...(opts.retry ?? {}) },
    onRetry: (r) => client.retries.push({ status: r.status, errorCode: r.errorCode, delayMs: r.delayMs }),
  });
  client.beforePage = opts.beforePage;
  const target = openTarget(targetUrl);
  await target.open({ writer: true });
  try {
    const summary: RunSummary = await new SyncEngine(client, target, opts).runOnce();
    return { summary, listings: client.listings, pages: client.pages, cursors: client.cursors, retries: client.retries, appends: typeof target.startAppend === "function" };
  } finally {
    await target.close();
    await client.close();
  }
}

export async function withTarget<T>(url: string, work: (t: Target) => Promise<T>): Promise<T> {
  const target = openTarget(url);
  await target.open({ writer: false });
  try {
    return await work(target);
  } finally {
    await target.close();
  }
}

/** One connection to a PostgreSQL copy for `work`, closed after it. */
async function onPostgres<T>(db: TargetDb, work: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: db.url });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/** The SQLite copy's file opened for `work`, closed after it. */
function onSqlite<T>(db: TargetDb, work: (d: Database.Database) => T, options: { readonly?: boolean } = {}): T {
  const d = new Database(db.url.replace(/^sqlite:/, ""), options);
  try {
    return work(d);
  } finally {
    d.close();
  }
}

/** The copy of one table as export-form text (booleans t/f, nulls as null). */
export async function copyRows(db: TargetDb, table: string, columns: string[]): Promise<Array<Record<string, string | null>>> {
  if (db.kind === "postgres") {
    return onPostgres(db, async (c) => {
      await c.query("SET TimeZone = 'UTC'");
      const cols = columns.map((k) => `CASE WHEN pg_typeof("${k}") = 'boolean'::regtype THEN left("${k}"::text, 1) ELSE "${k}"::text END AS "${k}"`);
      return (await c.query(`SELECT ${cols.join(", ")} FROM "${table}"`)).rows;
    });
  }
  if (db.kind === "duckdb") {
    // Numbers are DOUBLE, read as JS numbers (normalizeExportRow reads the export's the same way); booleans as t/f like the export.
    const cols = columns.map((k) => `CASE WHEN typeof("${k}") = 'BOOLEAN' THEN left(CAST("${k}" AS VARCHAR), 1) WHEN typeof("${k}") = 'DOUBLE' THEN NULL ELSE CAST("${k}" AS VARCHAR) END AS "${k}", CASE WHEN typeof("${k}") = 'DOUBLE' THEN "${k}" END AS "${k}$number"`);
    return (await onDuckdb(db, `SELECT ${cols.join(", ")} FROM "${table}"`)).map((r) =>
      Object.fromEntries(columns.map((k) => [k, r[`${k}$number`] !== null && r[`${k}$number`] !== undefined ? String(r[`${k}$number`]) : (r[k] as string | null)])),
    );
  }
  return onSqlite(
    db,
    (d) =>
      (d.prepare(`SELECT ${columns.map((k) => `"${k}"`).join(", ")} FROM "${table}"`).all() as Array<Record<string, unknown>>).map((r) =>
        Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? null : typeof v === "number" ? String(v) : String(v)])),
      ),
    { readonly: true },
  );
}

/** Whether the copy's table has a unique key (PostgreSQL: its primary key; SQLite: a unique index); DuckDB tables have none. */
export async function hasUniqueKey(db: TargetDb, table: string): Promise<boolean> {
  if (db.kind === "postgres") {
    return onPostgres(db, async (c) => (await c.query("SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'", [`"${table}"`])).rowCount === 1);
  }
  if (db.kind === "duckdb") throw new Error("DuckDB copies declare no key");
  return onSqlite(db, (d) => d.prepare(`SELECT 1 FROM pragma_index_list(?) WHERE "unique" = 1`).get(table) !== undefined, { readonly: true });
}

/** Runs statements on the copy (a test tampering with it, as a person or a bug might). */
export async function execOnCopy(db: TargetDb, sql: string): Promise<void> {
  if (db.kind === "postgres") {
    await onPostgres(db, (c) => c.query(sql));
    return;
  }
  if (db.kind === "duckdb") {
    await onDuckdb(db, sql);
    return;
  }
  onSqlite(db, (d) => d.exec(sql));
}

/** Export rows and copy rows keyed alike and compared as text; booleans in SQLite are 1/0. */
export function normalizeExportRow(row: Row, columns: string[], booleanColumns: Set<string>, kind: TargetDb["kind"], numberColumns = new Set<string>()) {
  const out: Record<string, string | null> = {};
  for (const k of columns) {
    const v = row[k] === undefined || row[k] === "" ? null : row[k];
    if (kind === "duckdb" && numberColumns.has(k) && v !== null) out[k] = String(Number(v));
    else out[k] = kind === "sqlite" && booleanColumns.has(k) && v !== null ? (v === "t" ? "1" : "0") : v;
  }
  return out;
}

export const rowKey = (r: Record<string, unknown>) => (r.row_index !== undefined && r.row_index !== null ? `${r.id}/${r.row_index}` : String(r.id));

export interface CliRun {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The CLI as a process (JSON lines, since its output is a pipe). */
export function runCli(args: string[], env: Record<string, string>): CliRun {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
    cwd: ROOT,
    env: { ...process.env, EXPORT_API_KEY: "", EXPORT_API_KEY_FILE: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stdout!.on("data", (c: Buffer) => stdout.push(c.toString()));
  child.stderr!.on("data", (c: Buffer) => stderr.push(c.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { child, stdout, stderr, exit };
}

export const jsonLines = (chunks: string[]) =>
  chunks
    .join("")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, any>);

/**
 * An HTTP-transparent TCP proxy in front of the gateway that aborts responses: while `faults` is
 * above zero, a connection that has passed `afterBytes` bytes towards the client is destroyed
 * mid-body (the server-side abort of a failed stream, as the client sees it).
 */
export async function startCuttingProxy(targetPort: number, afterBytes: number) {
  const { createServer, connect } = await import("node:net");
  const state = { faults: 0, cuts: 0 };
  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    let sent = 0;
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.on("data", (chunk: Buffer) => {
      // Count per response: a kept-alive connection carries several.
      if (chunk.subarray(0, 9).toString("latin1") === "HTTP/1.1 ") sent = 0;
      sent += chunk.length;
      if (state.faults > 0 && sent > afterBytes) {
        state.faults--;
        state.cuts++;
        client.write(chunk.subarray(0, Math.max(0, chunk.length - (sent - afterBytes))));
        drop();
        return;
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    state,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
