/**
 * What writes a SQLite copy's pages, on whichever connection does it: the copy file's settings, the
 * statements kept prepared, one page's transaction (PageInserter), the deferred key's build and the
 * state row. The target's own connection writes the rewrite feed's parsed pages with it; the page
 * writer thread (./sqlite-page-writer) writes the CSV pages with it on a connection of its own.
 */
import Database from "better-sqlite3";
import type { Cell } from "../csv";
import { quoteIdent as q, STATE_SCHEMA } from "./sql";
import { AppendRefused, GENERATION_COLUMN, type TablePlan } from "./target";

const TYPES: Record<string, string> = { number: "NUMERIC", boolean: "INTEGER" };
export const sqliteType = (dataType: string) => TYPES[dataType] ?? "TEXT";

export const META = q(`${STATE_SCHEMA}$meta`);
export const DATASETS = q(`${STATE_SCHEMA}$datasets`);
export const TOUCHED = q(`${STATE_SCHEMA}$touched`);

/** SQLite's page size for a copy file it creates (openCopyDatabase). */
const PAGE_SIZE = 16_384;
/** Insert statements kept prepared (PreparedStatements): a few datasets' worth. */
const PREPARED_STATEMENTS = 8;
/** Rows per INSERT statement of a page, fewer for wide tables (SQLite binds at most 32 766 variables). */
const ROWS_PER_STATEMENT = 64;
const VARIABLES_PER_STATEMENT = 8_000;
const BYTES_PER_STATEMENT = 256 * 1024;

/** A connection to a copy file, with the settings every connection writing it uses. */
export function openCopyDatabase(file: string): Database.Database {
  const db = new Database(file);
  // Pages of 16 KiB instead of 4 KiB for a new copy file (the size of an existing one stays): a
  // dataset's row of 1–2 KB no longer spans pages, and a page's commit writes a quarter as many
  // WAL frames; inserting 200 000 supplier rows took 0.8 s instead of 1.1 s (docs/sync-client.md).
  db.pragma(`page_size = ${PAGE_SIZE}`);
  db.pragma("journal_mode = WAL");
  // WAL with synchronous=NORMAL survives a killed process (not a power loss) without losing commits.
  db.pragma("synchronous = NORMAL");
  // A checkpoint (two fsyncs) every ~40 MB of WAL instead of every ~4 MB: a backfill's commits took
  // half the time (a page's rows are written once to the WAL either way).
  db.pragma("wal_autocheckpoint = 10000");
  db.pragma("busy_timeout = 10000");
  return db;
}

/**
 * Statements prepared once for the last few texts: a page's multi-row insert (about 2 000
 * placeholders) took 0.8 ms to prepare, every page again. SQLite re-prepares a kept statement itself
 * when the schema changed under it (a column added, on this connection or another).
 */
export class PreparedStatements {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  get(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement) this.statements.delete(sql);
    else statement = this.db.prepare(sql);
    // Most recently used last; the oldest go beyond the bound (a copy has a statement or two per dataset).
    this.statements.set(sql, statement);
    for (const oldest of this.statements.keys()) {
      if (this.statements.size <= PREPARED_STATEMENTS) break;
      this.statements.delete(oldest);
    }
    return statement;
  }
}

/** What a page's transaction needs to know before its rows. */
export interface PageStart {
  plan: TablePlan;
  /** The page's header: aligned with each row. */
  header: string[];
  generation: number;
  /** See AppendRefused. */
  append: boolean;
}

/**
 * One page's transaction (`BEGIN IMMEDIATE … COMMIT`): the rows are upserted as they come, in
 * multi-row statements (an appended page inserts, into a table whose key index is built when the
 * append ends: SqliteTarget.startAppend), then the touched grid ids and the state are written.
 * Booleans are stored as 1/0, numbers with NUMERIC affinity, everything else as the export's text.
 */
export class PageInserter {
  rows = 0;
  /** The last row added; null before the first. */
  lastRow: Cell[] | null = null;
  private readonly used: Array<{ key: string; i: number; type: string }>;
  private readonly converters: Array<(v: Cell) => unknown>;
  private readonly width: number;
  private readonly batch: number;
  private readonly values: unknown[];
  private filled = 0;
  private text = 0;
  private many: Database.Statement | undefined;
  private one: Database.Statement | undefined;
  private readonly grid: { idAt: number; rowIndexAt: number; lastModifiedAt: number } | null;
  private readonly touched = new Map<string, { lastModified: string; max: number }>();

  constructor(
    private readonly db: Database.Database,
    private readonly statements: PreparedStatements,
    private readonly page: PageStart,
  ) {
    const { plan, header, append } = page;
    this.used = usedColumns(plan, header);
    this.converters = this.used.map((c) => converter(c.type));
    // Rows go in batches of `batch` per statement (one call into SQLite for many rows), the rest one
    // by one. An appended page (see AppendRefused) inserts: a stored key fails the statement.
    this.width = this.used.length + 1;
    this.batch = Math.max(1, Math.min(ROWS_PER_STATEMENT, Math.floor(VARIABLES_PER_STATEMENT / this.width)));
    this.values = new Array(this.batch * this.width);
    this.grid = plan.keyColumns.includes("row_index") && !append ? { idAt: header.indexOf("id"), rowIndexAt: header.indexOf("row_index"), lastModifiedAt: header.indexOf("last_modified") } : null;
  }

  begin(): void {
    this.db.exec("BEGIN IMMEDIATE");
    try {
      if (!this.page.append) ensureKey(this.db, this.page.plan);
    } catch (err) {
      this.rollback(err);
    }
  }

  add(row: Cell[]): void {
    const { used, converters, values } = this;
    const at = this.filled * this.width;
    for (let j = 0; j < used.length; j++) {
      const cell = row[used[j].i];
      if (cell !== null) this.text += cell.length;
      values[at + j] = converters[j](cell);
    }
    values[at + used.length] = this.page.generation;
    // Rows held for a statement: at most `batch`, and no more text than BYTES_PER_STATEMENT (wide rows go one by one).
    if (++this.filled === this.batch || this.text > BYTES_PER_STATEMENT) this.flush();
    this.rows++;
    this.lastRow = row;
    if (this.grid) {
      const id = row[this.grid.idAt] as string;
      const rowIndex = Number(row[this.grid.rowIndexAt]);
      const lastModified = row[this.grid.lastModifiedAt] ?? "";
      const seen = this.touched.get(id);
      if (!seen || lastModified > seen.lastModified) this.touched.set(id, { lastModified, max: rowIndex });
      else if (rowIndex > seen.max) seen.max = rowIndex;
    }
  }

  /** The rest of the rows, the touched grid ids and the state (its key, table and JSON text), then COMMIT. */
  commit(state: StateRow): void {
    if (this.filled) this.flush();
    this.values.fill(null);
    if (this.touched.size) {
      const touch = this.db.prepare(
        `INSERT INTO ${TOUCHED} (dataset_key, id, last_modified, max_row_index) VALUES (?, ?, ?, ?)
         ON CONFLICT (dataset_key, id) DO UPDATE SET
           max_row_index = CASE WHEN excluded.last_modified > last_modified THEN excluded.max_row_index ELSE max(max_row_index, excluded.max_row_index) END,
           last_modified = max(last_modified, excluded.last_modified)`,
      );
      for (const [id, t] of this.touched) touch.run(state.key, id, t.lastModified, t.max);
    }
    saveStateRow(this.db, state);
    this.db.exec("COMMIT");
  }

  /** Rolls the page back and throws `err`, as AppendRefused when an appended page met a stored key. */
  rollback(err: unknown): never {
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
    if (this.page.append && isKeyViolation(err)) throw new AppendRefused("a key of the page is stored already");
    throw err;
  }

  private flush(): void {
    const { batch, width, values, filled } = this;
    if (filled === batch) runWith((this.many ??= this.insert(batch)), values);
    else for (let i = 0; i < filled; i++) runWith((this.one ??= this.insert(1)), values.slice(i * width, (i + 1) * width));
    this.filled = 0;
    this.text = 0;
  }

  private insert(count: number): Database.Statement {
    const { plan, header, append } = this.page;
    const inHeader = new Set(header);
    const updates = this.used
      .filter((c) => !plan.keyColumns.includes(c.key))
      .map((c) => `${q(c.key)} = excluded.${q(c.key)}`)
      .concat(Object.keys(plan.columns).filter((k) => !inHeader.has(k) && !plan.keyColumns.includes(k)).map((k) => `${q(k)} = NULL`))
      .concat([`${q(GENERATION_COLUMN)} = excluded.${q(GENERATION_COLUMN)}`]);
    return this.statements.get(
      `INSERT INTO ${q(plan.table)} (${this.used.map((c) => q(c.key)).join(", ")}, ${q(GENERATION_COLUMN)}) VALUES ` +
        Array.from({ length: count }, () => `(${this.used.map(() => "?").join(", ")}, ?)`).join(", ") +
        (append ? "" : ` ON CONFLICT (${plan.keyColumns.map(q).join(", ")}) DO UPDATE SET ${updates.join(", ")}`),
    );
  }
}

/** A key of the page is stored already (a unique index or a declared primary key refused it). */
export const isKeyViolation = (err: unknown) => /^SQLITE_CONSTRAINT_(PRIMARYKEY|UNIQUE)$/.test(String((err as { code?: string } | null)?.code));

/** The state row of a dataset: its key, table and the state as JSON text. */
export interface StateRow {
  key: string;
  table: string;
  json: string;
}

export const stateRow = (state: { key: string; table: string }): StateRow => ({ key: state.key, table: state.table, json: JSON.stringify(state) });

export function saveStateRow(db: Database.Database, state: StateRow): void {
  db.prepare(
    `INSERT INTO ${DATASETS} (dataset_key, table_name, state, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (dataset_key) DO UPDATE SET table_name = excluded.table_name, state = excluded.state, updated_at = excluded.updated_at`,
  ).run(state.key, state.table, state.json, new Date().toISOString());
}

/** The unique index keying a table (`$` keeps it apart from every dataset key). */
export const keyIndex = (table: string) => `${table}$key`;
export const createKey = (plan: TablePlan) => `CREATE UNIQUE INDEX ${q(keyIndex(plan.table))} ON ${q(plan.table)} (${plan.keyColumns.map(q).join(", ")})`;

/**
 * Builds the key index a first backfill deferred, before anything is upserted into the table and
 * when the read ends (finishDataset), in the caller's transaction. Without it an append cannot
 * refuse a stored key: a row edited during the read and served again on a later page is stored
 * twice. Such rows (the build fails on them) are resolved as upserts would have: of each key, the
 * row inserted last stays (the highest rowid: an append-only table numbers its rows in insertion
 * order); of a grid, an id's rows older than its newest version go too (its rows replaced as a set).
 */
export function ensureKey(db: Database.Database, plan: TablePlan): void {
  const keyed = db.prepare(`SELECT 1 FROM pragma_index_list(?) WHERE origin = 'pk' OR name = ?`).get(plan.table, keyIndex(plan.table));
  if (keyed) return;
  try {
    db.exec(createKey(plan));
    return;
  } catch (err) {
    // A failed statement is undone on its own; the transaction goes on.
    if ((err as { code?: string }).code !== "SQLITE_CONSTRAINT_UNIQUE") throw err;
  }
  const table = q(plan.table);
  const keys = plan.keyColumns.map(q).join(", ");
  const replaced = plan.keyColumns.includes("row_index") && "last_modified" in plan.columns ? "last_modified < max(last_modified) OVER (PARTITION BY id)" : "0";
  db.exec(
    `DELETE FROM ${table} WHERE rowid IN (
       SELECT at FROM (SELECT rowid AS at, row_number() OVER (PARTITION BY ${keys} ORDER BY rowid DESC) AS nth, ${replaced} AS replaced FROM ${table})
        WHERE nth > 1 OR replaced)`,
  );
  db.exec(createKey(plan));
}

/**
 * Runs `statement` with `values` as its positional parameters, passed as arguments, not as one
 * array: better-sqlite3 reads an array's elements one by one through V8's object interface and its
 * arguments directly. A backfill of 100 000 suppliers cost the syncing process 17 % less CPU
 * (docs/sync-client.md, the storage settings of "The state model"). At most
 * VARIABLES_PER_STATEMENT values a batch, or one row's (SQLite allows 2 000 columns).
 */
export const runWith = (statement: Database.Statement, values: readonly unknown[]) => statement.run(...values);

/** The plan's columns present in the header, with their position in it and their type. */
export function usedColumns(plan: TablePlan, header: string[]): Array<{ key: string; i: number; type: string }> {
  return header.map((key, i) => ({ key, i, type: plan.columns[key] })).filter((c) => c.type !== undefined);
}

/** Export text → SQLite value by the column's listing dataType. */
export function converter(dataType: string): (v: Cell) => unknown {
  if (dataType === "boolean") return (v) => (v === "t" ? 1 : v === "f" ? 0 : v === "" ? null : v);
  if (dataType === "text" || TYPES[dataType] === undefined) return (v) => v;
  return (v) => (v === "" ? null : v);
}
