/**
 * SQLite target (better-sqlite3, WAL). A page is one `BEGIN IMMEDIATE … COMMIT` (PageInserter,
 * ./sqlite-pages): its rows upserted as they stream, in multi-row statements (an appended page
 * inserts, into a table whose key index is built when the append ends: see startAppend and
 * AppendRefused), the touched grid ids and the state written, then COMMIT. CSV pages are written
 * on a thread of their own (PageWriterThread), the rewrite feed's parsed pages on this connection.
 */
import type Database from "better-sqlite3";
import { reviveDatasetState, type DatasetState, type SyncState } from "../state";
import { quoteIdent as q } from "./sql";
import { PageWriterThread } from "./sqlite-page-writer";
import {
  converter,
  createKey,
  DATASETS,
  ensureKey,
  keyIndex,
  META,
  openCopyDatabase,
  PageInserter,
  PreparedStatements,
  runWith,
  saveStateRow,
  sqliteType,
  stateRow,
  TOUCHED,
  usedColumns,
} from "./sqlite-pages";
import { GENERATION_COLUMN, type ContentComparison, type ContentDifferences, type FinishDataset, type FinishResult, type PageWrite, type RawPageWrite, type TablePlan, type Target, type TombstoneWrite } from "./target";

export { sqliteType } from "./sqlite-pages";

export class SqliteTarget implements Target {
  readonly kind = "sqlite" as const;
  readonly maxConcurrency = 1;
  private readonly db: Database.Database;
  private readonly statements: PreparedStatements;
  /** Writes the CSV pages (writeRawPage): started when the target opens as a writer, again after it was lost. */
  private pageWriter: PageWriterThread | null = null;

  constructor(readonly file: string) {
    this.db = openCopyDatabase(file);
    this.statements = new PreparedStatements(this.db);
  }

  async open({ writer }: { writer: boolean }): Promise<void> {
    if (!writer) return;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${META} (key TEXT PRIMARY KEY, value TEXT);
      CREATE TABLE IF NOT EXISTS ${DATASETS} (dataset_key TEXT PRIMARY KEY, table_name TEXT NOT NULL, state TEXT NOT NULL, updated_at TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ${TOUCHED} (dataset_key TEXT NOT NULL, id TEXT NOT NULL, last_modified TEXT NOT NULL, max_row_index INTEGER NOT NULL, PRIMARY KEY (dataset_key, id));`);
    // Started now, so that its start (loading the driver, opening the file) is not the first page's.
    await this.writerThread().ready;
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

  /** A page of parsed rows (the rewrite feed) on this connection. */
  async writePage(write: PageWrite): Promise<{ rows: number }> {
    const page = new PageInserter(this.db, this.statements, write);
    page.begin();
    try {
      for await (const row of write.rows) page.add(row);
      page.commit(stateRow(write.stateAfter()));
    } catch (err) {
      page.rollback(err);
    }
    return { rows: page.rows };
  }

  /** A CSV page, on the writer thread (PageWriterThread) while this thread reads the next. */
  async writeRawPage(write: RawPageWrite): Promise<{ rows: number }> {
    return this.writerThread().write(write);
  }

  /** The page writer thread, started again if it was lost. */
  private writerThread(): PageWriterThread {
    if (!this.pageWriter?.alive) this.pageWriter = new PageWriterThread(this.file);
    return this.pageWriter;
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
      ensureKey(this.db, finish.plan);
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
        ensureKey(this.db, write.plan);
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
    await this.pageWriter?.close();
    this.pageWriter = null;
    this.db.close();
  }

  private saveStateNow(state: DatasetState): void {
    saveStateRow(this.db, stateRow(state));
  }

  private tableExists(name: string): boolean {
    return this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
  }
}

/** compareContent's temporary tables: the export's rows as the copy's table types them, and its keys. */
const FRESH = "sync$fresh";
const FRESH_KEYS = "sync$fresh_keys";
/** Differences compareContent names. */
const EXAMPLES = 5;
