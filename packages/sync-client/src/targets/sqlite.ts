/**
 * SQLite target (better-sqlite3, WAL). A page is one `BEGIN IMMEDIATE … COMMIT`: the rows are
 * upserted as they stream, in multi-row statements (an appended page inserts, into a table whose
 * key index is built when the append ends: see startAppend and AppendRefused),
 * the touched grid ids and the state are written, then COMMIT. Booleans are stored as 1/0, numbers with NUMERIC affinity, everything else as the export's text.
 */
import Database from "better-sqlite3";
import type { Cell } from "../csv";
import { reviveDatasetState, type DatasetState, type SyncState } from "../state";
import { quoteIdent as q, STATE_SCHEMA } from "./sql";
import { AppendRefused, GENERATION_COLUMN, type ContentComparison, type ContentDifferences, type FinishDataset, type FinishResult, type PageWrite, type TablePlan, type Target, type TombstoneWrite } from "./target";

const TYPES: Record<string, string> = { number: "NUMERIC", boolean: "INTEGER" };
export const sqliteType = (dataType: string) => TYPES[dataType] ?? "TEXT";

const META = q(`${STATE_SCHEMA}$meta`);
const DATASETS = q(`${STATE_SCHEMA}$datasets`);
const TOUCHED = q(`${STATE_SCHEMA}$touched`);

export class SqliteTarget implements Target {
  readonly kind = "sqlite" as const;
  readonly maxConcurrency = 1;
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(readonly file: string) {
    this.db = new Database(file);
    // Pages of 16 KiB instead of 4 KiB for a new copy file (the size of an existing one stays): a
    // dataset's row of 1–2 KB no longer spans pages, and a page's commit writes a quarter as many
    // WAL frames; inserting 200 000 supplier rows took 0.8 s instead of 1.1 s (docs/sync-client.md).
    this.db.pragma(`page_size = ${PAGE_SIZE}`);
    this.db.pragma("journal_mode = WAL");
    // WAL with synchronous=NORMAL survives a killed process (not a power loss) without losing commits.
    this.db.pragma("synchronous = NORMAL");
    // A checkpoint (two fsyncs) every ~40 MB of WAL instead of every ~4 MB: a backfill's commits took
    // half the time (a page's rows are written once to the WAL either way).
    this.db.pragma("wal_autocheckpoint = 10000");
    this.db.pragma("busy_timeout = 10000");
  }

  async open({ writer }: { writer: boolean }): Promise<void> {
    if (!writer) return;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${META} (key TEXT PRIMARY KEY, value TEXT);
      CREATE TABLE IF NOT EXISTS ${DATASETS} (dataset_key TEXT PRIMARY KEY, table_name TEXT NOT NULL, state TEXT NOT NULL, updated_at TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ${TOUCHED} (dataset_key TEXT NOT NULL, id TEXT NOT NULL, last_modified TEXT NOT NULL, max_row_index INTEGER NOT NULL, PRIMARY KEY (dataset_key, id));`);
  }

  async loadState(): Promise<SyncState> {
    const datasets = new Map<string, DatasetState>();
    if (!this.tableExists("dataset_sync$datasets")) return { listingEtag: null, datasets };
    for (const row of this.db.prepare(`SELECT state FROM ${DATASETS} ORDER BY dataset_key`).all() as Array<{ state: string }>) {
      const state = reviveDatasetState(JSON.parse(row.state));
      datasets.set(state.key, state);
    }
    const meta = this.db.prepare(`SELECT value FROM ${META} WHERE key = 'listing_etag'`).get() as { value: string | null } | undefined;
    return { listingEtag: meta?.value ?? null, datasets };
  }

  async ensureTable(plan: TablePlan, applied: Record<string, string>): Promise<Record<string, string>> {
    const next = { ...applied };
    this.db.transaction(() => {
      const cols = Object.entries(plan.columns).map(([key, type]) => `${q(key)} ${sqliteType(type)}`);
      // The key is a unique index, not a declared PRIMARY KEY, so that a first backfill can defer it
      // (startAppend). Tables created by earlier versions keep their declared key (never deferred).
      if (!this.tableExists(plan.table)) {
        this.db.exec(`CREATE TABLE ${q(plan.table)} (${cols.join(", ")}, ${q(GENERATION_COLUMN)} INTEGER NOT NULL DEFAULT 0)`);
        this.db.exec(createKey(plan));
      }
      const existing = new Set((this.db.prepare(`SELECT name FROM pragma_table_info(?)`).all(plan.table) as Array<{ name: string }>).map((r) => r.name));
      for (const [key, type] of Object.entries(plan.columns)) {
        if (!existing.has(key)) this.db.exec(`ALTER TABLE ${q(plan.table)} ADD COLUMN ${q(key)} ${sqliteType(type)}`);
        // SQLite keeps each value's own type: a retyped column needs no change, only new conversions.
        next[key] = type;
      }
    })();
    return next;
  }

  async writePage(write: PageWrite): Promise<{ rows: number }> {
    const { plan, header } = write;
    const used = usedColumns(plan, header);
    const inHeader = new Set(header);
    const updates = used
      .filter((c) => !plan.keyColumns.includes(c.key))
      .map((c) => `${q(c.key)} = excluded.${q(c.key)}`)
      .concat(Object.keys(plan.columns).filter((k) => !inHeader.has(k) && !plan.keyColumns.includes(k)).map((k) => `${q(k)} = NULL`))
      .concat([`${q(GENERATION_COLUMN)} = excluded.${q(GENERATION_COLUMN)}`]);
    // Rows go in batches of `batch` per statement (one call into SQLite for many rows), the rest one
    // by one. An appended page (see AppendRefused) inserts: a stored key fails the statement.
    const width = used.length + 1;
    const batch = Math.max(1, Math.min(ROWS_PER_STATEMENT, Math.floor(VARIABLES_PER_STATEMENT / width)));
    const insert = (count: number) =>
      this.prepared(
        `INSERT INTO ${q(plan.table)} (${used.map((c) => q(c.key)).join(", ")}, ${q(GENERATION_COLUMN)}) VALUES ` +
          Array.from({ length: count }, () => `(${used.map(() => "?").join(", ")}, ?)`).join(", ") +
          (write.append ? "" : ` ON CONFLICT (${plan.keyColumns.map(q).join(", ")}) DO UPDATE SET ${updates.join(", ")}`),
      );
    let many: Database.Statement | undefined;
    let one: Database.Statement | undefined;
    const converters = used.map((c) => converter(c.type));
    const grid = plan.keyColumns.includes("row_index") && !write.append;
    const idAt = header.indexOf("id");
    const rowIndexAt = header.indexOf("row_index");
    const lastModifiedAt = header.indexOf("last_modified");
    const touched = new Map<string, { lastModified: string; max: number }>();
    let rows = 0;
    this.db.exec("BEGIN IMMEDIATE");
    try {
      if (!write.append) this.ensureKey(plan);
      const values: unknown[] = new Array(batch * width);
      let filled = 0;
      let text = 0;
      // Rows held for a statement: at most `batch`, and no more text than BYTES_PER_STATEMENT (wide rows go one by one).
      const flush = () => {
        if (filled === batch) runWith((many ??= insert(batch)), values);
        else for (let i = 0; i < filled; i++) runWith((one ??= insert(1)), values.slice(i * width, (i + 1) * width));
        filled = 0;
        text = 0;
      };
      for await (const row of write.rows) {
        const at = filled * width;
        for (let j = 0; j < used.length; j++) {
          const cell = row[used[j].i];
          if (cell !== null) text += cell.length;
          values[at + j] = converters[j](cell);
        }
        values[at + used.length] = write.generation;
        if (++filled === batch || text > BYTES_PER_STATEMENT) flush();
        rows++;
        if (grid) {
          const id = row[idAt] as string;
          const rowIndex = Number(row[rowIndexAt]);
          const lastModified = row[lastModifiedAt] ?? "";
          const seen = touched.get(id);
          if (!seen || lastModified > seen.lastModified) touched.set(id, { lastModified, max: rowIndex });
          else if (rowIndex > seen.max) seen.max = rowIndex;
        }
      }
      if (filled) flush();
      values.fill(null);
      const state = write.stateAfter();
      if (touched.size) {
        const touch = this.db.prepare(
          `INSERT INTO ${TOUCHED} (dataset_key, id, last_modified, max_row_index) VALUES (?, ?, ?, ?)
           ON CONFLICT (dataset_key, id) DO UPDATE SET
             max_row_index = CASE WHEN excluded.last_modified > last_modified THEN excluded.max_row_index ELSE max(max_row_index, excluded.max_row_index) END,
             last_modified = max(last_modified, excluded.last_modified)`,
        );
        for (const [id, t] of touched) touch.run(state.key, id, t.lastModified, t.max);
      }
      this.saveStateNow(state);
      this.db.exec("COMMIT");
    } catch (err) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      if (write.append && /^SQLITE_CONSTRAINT_(PRIMARYKEY|UNIQUE)$/.test(String((err as { code?: string }).code))) throw new AppendRefused("a key of the page is stored already");
      throw err;
    }
    return { rows };
  }

  /**
   * An empty table loses its key index until the append ends (ensureKey builds it): 500 000 grid
   * rows cost the syncing process 5.3 s of CPU into the indexed table (random ids: every insert
   * into the index lands elsewhere), 2.9 s into the bare table and 0.6 s more to build the index
   * once (docs/benchmarks-history.md). A declared PRIMARY KEY (a table of an earlier version)
   * stays, and refuses a stored key as before (AppendRefused).
   */
  async startAppend(plan: TablePlan, datasetKey: string): Promise<boolean> {
    return this.db.transaction(() => {
      const empty = this.db.prepare(`SELECT NOT EXISTS (SELECT 1 FROM ${q(plan.table)}) AS empty`).get() as { empty: number };
      if (!empty.empty) return false;
      this.db.prepare(`DELETE FROM ${TOUCHED} WHERE dataset_key = ?`).run(datasetKey);
      this.db.exec(`DROP INDEX IF EXISTS ${q(keyIndex(plan.table))}`);
      return true;
    }).immediate();
  }

  async finishDataset(finish: FinishDataset): Promise<FinishResult> {
    return this.db.transaction(() => {
      this.ensureKey(finish.plan);
      let trimmed = 0;
      let swept = 0;
      const table = q(finish.plan.table);
      if (finish.plan.keyColumns.includes("row_index")) {
        trimmed = this.db
          .prepare(
            `DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${TOUCHED} t WHERE t.dataset_key = ? AND t.id = ${table}.id AND ${table}.row_index > t.max_row_index)`,
          )
          .run(finish.state.key).changes;
        this.db.prepare(`DELETE FROM ${TOUCHED} WHERE dataset_key = ?`).run(finish.state.key);
      }
      if (finish.sweepBelowGeneration !== null) {
        swept = this.db.prepare(`DELETE FROM ${table} WHERE ${q(GENERATION_COLUMN)} < ?`).run(finish.sweepBelowGeneration).changes;
      }
      finish.state.rowsDeleted += trimmed + swept;
      this.saveStateNow(finish.state);
      return { trimmed, swept };
    }).immediate();
  }

  async applyTombstones(write: TombstoneWrite): Promise<number> {
    return this.db.transaction(() => {
      let deleted = 0;
      if (write.tombstones.length && this.tableExists(write.plan.table)) {
        // Each tombstone finds its rows through the key (a deferred one is built first).
        this.ensureKey(write.plan);
        // Both sides are the export's dateTime text (UTC, "+00", microseconds at most), which orders as text.
        const older = "last_modified" in write.plan.columns ? " AND (last_modified IS NULL OR last_modified < ?)" : "";
        const del = this.db.prepare(`DELETE FROM ${q(write.plan.table)} WHERE id = ?${older}`);
        for (const t of write.tombstones) deleted += (older ? del.run(t.id, t.deletedAt) : del.run(t.id)).changes;
      }
      write.state.rowsDeleted += deleted;
      this.saveStateNow(write.state);
      return deleted;
    }).immediate();
  }

  async trimObsoleteGridRows(gridTable: string, rootTable: string): Promise<number> {
    if (!this.tableExists(gridTable) || !this.tableExists(rootTable)) return 0;
    // The export's dateTime text (UTC, "+00") orders as text.
    return this.db
      .prepare(`DELETE FROM ${q(gridTable)} WHERE EXISTS (SELECT 1 FROM ${q(rootTable)} r WHERE r.id = ${q(gridTable)}.id AND ${q(gridTable)}.last_modified < r.last_modified)`)
      .run().changes;
  }

  async saveState(state: DatasetState): Promise<void> {
    this.saveStateNow(state);
  }

  async saveListingEtag(etag: string | null): Promise<void> {
    this.db.prepare(`INSERT INTO ${META} (key, value) VALUES ('listing_etag', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`).run(etag);
  }

  async countRows(table: string): Promise<number | null> {
    if (!this.tableExists(table)) return null;
    return (this.db.prepare(`SELECT count(*) AS n FROM ${q(table)}`).get() as { n: number }).n;
  }

  /**
   * The export's rows are converted as writePage converts them into a temporary table declared like
   * the copy's (same column types, so the same affinities), then compared column by column with
   * `IS`. Rolled back: nothing of it stays.
   */
  async compareContent({ plan, header, rows }: ContentComparison): Promise<ContentDifferences | null> {
    if (!this.tableExists(plan.table)) return null;
    const declared = (this.db.prepare(`SELECT name, type FROM pragma_table_info(?) ORDER BY cid`).all(plan.table) as Array<{ name: string; type: string }>).filter(
      (c) => c.name !== GENERATION_COLUMN,
    );
    const columns = declared.map((c) => c.name);
    const used = usedColumns(plan, header);
    const converters = used.map((c) => converter(c.type));
    const fresh = q(FRESH);
    const keys = plan.keyColumns.map(q);
    const sameKey = keys.map((k) => `f.${k} IS c.${k}`).join(" AND ");
    const sameValues = columns.map((k) => `f.${q(k)} IS c.${q(k)}`).join(" AND ");
    this.db.exec("BEGIN");
    try {
      this.db.exec(`CREATE TEMP TABLE ${fresh} (${declared.map((c) => `${q(c.name)} ${c.type}`).join(", ")})`);
      const insert = this.db.prepare(`INSERT INTO ${fresh} (${used.map((c) => q(c.key)).join(", ")}) VALUES (${used.map(() => "?").join(", ")})`);
      const values: unknown[] = new Array(used.length);
      for await (const row of rows) {
        for (let j = 0; j < used.length; j++) values[j] = converters[j](row[used[j].i]);
        runWith(insert, values);
      }
      this.db.exec(`CREATE INDEX temp.${q(`${FRESH}$key`)} ON ${fresh} (${keys.join(", ")})`);
      const count = (sql: string) => (this.db.prepare(sql).get() as { n: number }).n;
      // Each exported key once (its first row, and how many times the export returned it), grouped once.
      const distinctFresh = q(FRESH_KEYS);
      this.db.exec(
        `CREATE TEMP TABLE ${distinctFresh} AS SELECT ${keys.join(", ")}, count(*) AS n, min(rowid) AS first FROM ${fresh} GROUP BY ${keys.join(", ")}`,
      );
      const copy = q(plan.table);
      const result: ContentDifferences = {
        sourceRows: count(`SELECT count(*) AS n FROM ${fresh}`),
        copyRows: count(`SELECT count(*) AS n FROM ${copy}`),
        missing: count(`SELECT count(*) AS n FROM ${distinctFresh} f WHERE NOT EXISTS (SELECT 1 FROM ${copy} c WHERE ${sameKey})`),
        extra: count(`SELECT count(*) AS n FROM ${copy} c WHERE NOT EXISTS (SELECT 1 FROM ${fresh} f WHERE ${sameKey})`),
        changed: count(
          `SELECT count(*) AS n FROM ${distinctFresh} d JOIN ${fresh} f ON f.rowid = d.first JOIN ${copy} c ON ${sameKey} WHERE NOT (${sameValues})`,
        ),
        duplicated: count(`SELECT count(*) AS n FROM ${distinctFresh} f WHERE n > 1`),
        examples: [],
      };
      const keyText = (row: Record<string, unknown>) => plan.keyColumns.map((k) => `${k}=${String(row[k])}`).join(" ");
      const firstBy = (alias: string) => `ORDER BY ${keys.map((k) => `${alias}.${k}`).join(", ")} LIMIT ${EXAMPLES}`;
      const limit = firstBy("f");
      const changed = this.db
        .prepare(
          `SELECT ${columns.map((k) => `f.${q(k)} AS ${q(`f:${k}`)}, c.${q(k)} AS ${q(`c:${k}`)}`).join(", ")}
             FROM ${distinctFresh} d JOIN ${fresh} f ON f.rowid = d.first JOIN ${copy} c ON ${sameKey} WHERE NOT (${sameValues}) ${limit}`,
        )
        .all() as Array<Record<string, unknown>>;
      const side = (row: Record<string, unknown>, prefix: string) => Object.fromEntries(columns.map((k) => [k, row[`${prefix}:${k}`]]));
      const examples = [
        ...changed.map((row) => {
          const [f, c] = [side(row, "f"), side(row, "c")];
          return `changed ${keyText(f)} (${columns.filter((k) => f[k] !== c[k]).sort().join(", ")})`;
        }),
        ...(this.db.prepare(`SELECT f.* FROM ${distinctFresh} f WHERE n > 1 ${limit}`).all() as Array<Record<string, unknown>>).map((f) => `duplicated ${keyText(f)}`),
        ...(this.db.prepare(`SELECT c.* FROM ${copy} c WHERE NOT EXISTS (SELECT 1 FROM ${fresh} f WHERE ${sameKey}) ${firstBy("c")}`).all() as Array<Record<string, unknown>>).map(
          (c) => `extra ${keyText(c)}`,
        ),
        ...(this.db.prepare(`SELECT f.* FROM ${distinctFresh} f WHERE NOT EXISTS (SELECT 1 FROM ${copy} c WHERE ${sameKey}) ${limit}`).all() as Array<Record<string, unknown>>).map(
          (f) => `missing ${keyText(f)}`,
        ),
      ];
      result.examples = examples.sort().slice(0, EXAMPLES);
      return result;
    } finally {
      this.db.exec("ROLLBACK");
    }
  }

  async close(): Promise<void> {
    this.db.close();
  }

  /**
   * Builds the key index a first backfill deferred, before anything is upserted into the table and
   * when the read ends (finishDataset), in the caller's transaction. Without it an append cannot
   * refuse a stored key: a row edited during the read and served again on a later page is stored
   * twice. Such rows (the build fails on them) are resolved as upserts would have: of each key, the
   * row inserted last stays (the highest rowid: an append-only table numbers its rows in insertion
   * order); of a grid, an id's rows older than its newest version go too (its rows replaced as a set).
   */
  private ensureKey(plan: TablePlan): void {
    const keyed = this.db.prepare(`SELECT 1 FROM pragma_index_list(?) WHERE origin = 'pk' OR name = ?`).get(plan.table, keyIndex(plan.table));
    if (keyed) return;
    try {
      this.db.exec(createKey(plan));
      return;
    } catch (err) {
      // A failed statement is undone on its own; the transaction goes on.
      if ((err as { code?: string }).code !== "SQLITE_CONSTRAINT_UNIQUE") throw err;
    }
    const table = q(plan.table);
    const keys = plan.keyColumns.map(q).join(", ");
    const replaced = plan.keyColumns.includes("row_index") && "last_modified" in plan.columns ? "last_modified < max(last_modified) OVER (PARTITION BY id)" : "0";
    this.db.exec(
      `DELETE FROM ${table} WHERE rowid IN (
         SELECT at FROM (SELECT rowid AS at, row_number() OVER (PARTITION BY ${keys} ORDER BY rowid DESC) AS nth, ${replaced} AS replaced FROM ${table})
          WHERE nth > 1 OR replaced)`,
    );
    this.db.exec(createKey(plan));
  }

  /**
   * The statement of `sql`, prepared once for the last few texts: a page's multi-row insert (about
   * 2 000 placeholders) took 0.8 ms to prepare, every page again. SQLite re-prepares a kept
   * statement itself when the schema changed under it (a column added).
   */
  private prepared(sql: string): Database.Statement {
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

  private tableExists(name: string): boolean {
    return this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
  }

  private saveStateNow(state: DatasetState): void {
    this.db
      .prepare(
        `INSERT INTO ${DATASETS} (dataset_key, table_name, state, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (dataset_key) DO UPDATE SET table_name = excluded.table_name, state = excluded.state, updated_at = excluded.updated_at`,
      )
      .run(state.key, state.table, JSON.stringify(state), new Date().toISOString());
  }
}

/** SQLite's page size for a copy file it creates (SqliteTarget's constructor). */
const PAGE_SIZE = 16_384;
/** Insert statements kept prepared (SqliteTarget.prepared): a few datasets' worth. */
const PREPARED_STATEMENTS = 8;

/** Rows per INSERT statement of a page, fewer for wide tables (SQLite binds at most 32 766 variables). */
const ROWS_PER_STATEMENT = 64;
const VARIABLES_PER_STATEMENT = 8_000;
const BYTES_PER_STATEMENT = 256 * 1024;

/**
 * Runs `statement` with `values` as its positional parameters, passed as arguments, not as one
 * array: better-sqlite3 reads an array's elements one by one through V8's object interface and its
 * arguments directly. A backfill of 100 000 suppliers cost the syncing process 17 % less CPU
 * (docs/sync-client.md, the storage settings of "The state model"). At most
 * VARIABLES_PER_STATEMENT values a batch, or one row's (SQLite allows 2 000 columns).
 */
const runWith = (statement: Database.Statement, values: readonly unknown[]) => statement.run(...values);

/** The unique index keying a table (`$` keeps it apart from every dataset key). */
const keyIndex = (table: string) => `${table}$key`;
const createKey = (plan: TablePlan) => `CREATE UNIQUE INDEX ${q(keyIndex(plan.table))} ON ${q(plan.table)} (${plan.keyColumns.map(q).join(", ")})`;

/** The plan's columns present in the header, with their position in it and their type. */
function usedColumns(plan: TablePlan, header: string[]): Array<{ key: string; i: number; type: string }> {
  return header.map((key, i) => ({ key, i, type: plan.columns[key] })).filter((c) => c.type !== undefined);
}

/** compareContent's temporary tables: the export's rows as the copy's table types them, and its keys. */
const FRESH = "sync$fresh";
const FRESH_KEYS = "sync$fresh_keys";
/** Differences compareContent names. */
const EXAMPLES = 5;

/** Export text → SQLite value by the column's listing dataType. */
function converter(dataType: string): (v: Cell) => unknown {
  if (dataType === "boolean") return (v) => (v === "t" ? 1 : v === "f" ? 0 : v === "" ? null : v);
  if (dataType === "text" || TYPES[dataType] === undefined) return (v) => v;
  return (v) => (v === "" ? null : v);
}
