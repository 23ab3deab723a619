/**
 * DuckDB target (@duckdb/node-api, an optional peer loaded on open). A page is one transaction
 * (one per part of about 32 MB of records: writeRawPageInParts):
 * its raw records are written to a scratch file and loaded by DuckDB's own CSV reader into a
 * temporary all-VARCHAR staging table (the export's dialect: an unquoted empty field is null, `""`
 * an empty string), the rows of its keys are deleted from the dataset's table and the page appended
 * with typed casts, the grid ids to trim are recorded and the state row is written, then COMMIT. DuckDB allows one writing process per file:
 * that is the writer lock. State lives in the schema `dataset_sync`, copies in `main`.
 */
import { closeSync, createWriteStream, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { DuckDBAppender, DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { CursorFieldReplaced, type Cell } from "../csv";
import { reviveDatasetState, type DatasetState, type SyncState } from "../state";
import { columnTypes, quoteIdent as q, stagedColumns, STATE_SCHEMA as STATE } from "./sql";
import { GENERATION_COLUMN, type ContentComparison, type ContentDifferences, type FinishDataset, type FinishResult, type PageWrite, type RawPageWrite, type TablePlan, type Target, type TombstoneWrite } from "./target";

export const duckdbType = columnTypes({ text: "VARCHAR", number: "DOUBLE", boolean: "BOOLEAN", dateTime: "TIMESTAMPTZ", localDateTime: "TIMESTAMP", date: "DATE", uuid: "UUID" }, "VARCHAR");

/** duckdb_columns()' data_type of a type duckdbType gives, where it spells it differently. */
const STORED_SPELLING: Record<string, string> = { TIMESTAMPTZ: "TIMESTAMP WITH TIME ZONE" };
const storedType = (type: string) => STORED_SPELLING[duckdbType(type)] ?? duckdbType(type);

const STAGE = q("sync$stage");
const FRESH_STAGE = q("sync$fresh_stage");
const FRESH = q("sync$fresh");
const FRESH_KEYS = q("sync$fresh_keys");
const TOMBSTONES = q("sync$tombstones");
const REPEATED = q("sync$repeated");
/** Differences compareContent names. */
const EXAMPLES = 5;
/**
 * Reference fields run to hundreds of thousands of characters: a record may take 32 MiB (DuckDB's
 * default line limit is 2 MB). The reader's buffer (by default 16 lines' worth) is set to two.
 */
const MAX_LINE_SIZE = 32 * 1024 * 1024;
const BUFFER_SIZE = 2 * MAX_LINE_SIZE;
/**
 * DuckDB checkpoints once its write-ahead log holds this much (and when the copy closes). Its
 * default, 16 MB, checkpointed every dozen pages of suppliers, each checkpoint rewriting the table's
 * open row group: commits took several times as long (docs/benchmarks-history.md, "DuckDB"); with
 * wide rows each one re-read every row so far. With MEMORY_LIMIT, rows waiting for a checkpoint
 * spill instead of filling memory, so checkpoints can be rare.
 */
const CHECKPOINT_THRESHOLD = "4GB";
/**
 * DuckDB's buffer manager limit in a writing sync (its default is 80 % of the machine's memory).
 * With it, committed rows spill to disk instead of staying in memory until a checkpoint: syncing
 * 0.6 / 1.2 / 2.4 / 4.8 GB of 300 KB cells peaked at 1.0 / 1.3 / 1.4 / 1.4 GB (without: 2.1 GB and
 * 2.7 GB for the first two). 512 MB failed ("failed to pin block"): the CSV reader's buffers
 * (BUFFER_SIZE) and a checkpoint's pinned blocks need room (docs/benchmarks-history.md).
 */
const MEMORY_LIMIT = "1GB";
/** Threads of a writing sync's DuckDB: one. With one per core its CSV reader and inserts competed with the syncing process and the export for the same cores (docs/sync-client.md, "Storage settings"). */
const WRITER_THREADS = "1";
/** A page is committed in parts of about this many bytes of records (writeRawPageInParts). */
export const PAGE_PART_BYTES = 32 * 1024 * 1024;

type DuckDBModule = typeof import("@duckdb/node-api");

/** A spooled page as DuckDB's CSV reader reads it: the export's dialect, every column `c<i>` VARCHAR. */
function readPageCsv(file: string, columns: number): string {
  const names = Array.from({ length: columns }, (_, i) => `'c${i}': 'VARCHAR'`).join(", ");
  return `read_csv('${file.replace(/'/g, "''")}',
    header = false, auto_detect = false, delim = ',', quote = '"', escape = '"', new_line = '\\n',
    nullstr = '', allow_quoted_nulls = false, max_line_size = ${MAX_LINE_SIZE}, buffer_size = ${BUFFER_SIZE}, columns = {${names}})`;
}

/** Loads the optional peer, naming it when it is missing. */
async function loadDuckDB(): Promise<DuckDBModule> {
  try {
    return await import("@duckdb/node-api");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND" && /@duckdb\/node-api/.test((err as Error).message)) {
      throw new Error("duckdb: targets need the optional dependency @duckdb/node-api (npm install @duckdb/node-api)");
    }
    throw err;
  }
}

export class DuckDBTarget implements Target {
  readonly kind = "duckdb" as const;
  /** One connection, one writer. */
  readonly maxConcurrency = 1;
  private instance: DuckDBInstance | null = null;
  private conn: DuckDBConnection | null = null;
  private scratch: string | null = null;

  /** `partBytes`: the parts a page is committed in (PAGE_PART_BYTES; tests set it small). */
  constructor(
    readonly file: string,
    private readonly opts: { partBytes?: number } = {},
  ) {}

  private get db(): DuckDBConnection {
    if (!this.conn) throw new Error("the DuckDB target is not open");
    return this.conn;
  }

  async open({ writer }: { writer: boolean }): Promise<void> {
    const { DuckDBInstance } = await loadDuckDB();
    // A reader opens read-only, so several can look at a copy no process is writing. A writer's
    // memory is bounded (MEMORY_LIMIT) and checkpoints are rare (CHECKPOINT_THRESHOLD); a page is
    // held in memory until its commit (transaction-local data does not spill), so a page commits
    // in parts (writeRawPageInParts).
    this.instance = await DuckDBInstance.create(this.file, writer || this.file === ":memory:" ? { checkpoint_threshold: CHECKPOINT_THRESHOLD, memory_limit: MEMORY_LIMIT, threads: WRITER_THREADS } : { access_mode: "READ_ONLY" });
    this.conn = await this.instance.connect();
    // Value text forms equal the export's own (UTC).
    await this.db.run("SET TimeZone = 'UTC'");
    if (!writer) return;
    await this.db.run(`
      CREATE SCHEMA IF NOT EXISTS ${STATE};
      CREATE TABLE IF NOT EXISTS ${STATE}.meta (key VARCHAR PRIMARY KEY, value VARCHAR);
      CREATE TABLE IF NOT EXISTS ${STATE}.datasets (dataset_key VARCHAR PRIMARY KEY, table_name VARCHAR NOT NULL, state VARCHAR NOT NULL, updated_at TIMESTAMPTZ NOT NULL);
      CREATE TABLE IF NOT EXISTS ${STATE}.touched (dataset_key VARCHAR NOT NULL, id UUID NOT NULL, last_modified TIMESTAMPTZ NOT NULL, max_row_index DOUBLE NOT NULL, PRIMARY KEY (dataset_key, id));`);
    // Beside the copy, so a killed process's leftover page is overwritten by the next run, not left in /tmp.
    this.scratch = this.file === ":memory:" ? mkdtempSync(join(tmpdir(), "dataset-sync-duckdb-")) : `${this.file}.dataset-sync`;
    mkdirSync(this.scratch, { recursive: true });
  }

  private async rows(sql: string, values?: unknown[]): Promise<Array<Record<string, unknown>>> {
    const reader = await this.db.runAndReadAll(sql, values as never);
    return reader.getRowObjectsJS() as Array<Record<string, unknown>>;
  }

  private async changed(sql: string, values?: unknown[]): Promise<number> {
    return Number((await this.db.run(sql, values as never)).rowsChanged);
  }

  private async tableExists(name: string, schema = "main"): Promise<boolean> {
    return (await this.rows("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND table_name = ? AND database_name = current_database()", [schema, name])).length > 0;
  }

  async loadState(): Promise<SyncState> {
    const datasets = new Map<string, DatasetState>();
    if (!(await this.tableExists("datasets", STATE))) return { listingEtag: null, datasets };
    for (const row of await this.rows(`SELECT state FROM ${STATE}.datasets ORDER BY dataset_key`)) {
      const state = reviveDatasetState(JSON.parse(row.state as string));
      datasets.set(state.key, state);
    }
    const meta = await this.rows(`SELECT value FROM ${STATE}.meta WHERE key = 'listing_etag'`);
    return { listingEtag: (meta[0]?.value as string | null | undefined) ?? null, datasets };
  }

  async ensureTable(plan: TablePlan, applied: Record<string, string>): Promise<Record<string, string>> {
    return this.transaction(async () => {
      const cols = Object.entries(plan.columns).map(([key, type]) => `${q(key)} ${duckdbType(type)}`);
      await this.db.run(
        // No PRIMARY KEY: see upsertFromStage (the keys are kept unique by each page's delete-then-append).
        `CREATE TABLE IF NOT EXISTS ${q(plan.table)} (${cols.join(", ")}, ${q(GENERATION_COLUMN)} BIGINT NOT NULL DEFAULT 0)`,
      );
      const existing = new Map(
        (await this.rows("SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? AND database_name = current_database()", [plan.table])).map(
          (r) => [r.column_name as string, r.data_type as string],
        ),
      );
      const next = { ...applied };
      for (const [key, type] of Object.entries(plan.columns)) {
        const stored = existing.get(key);
        if (stored === undefined) {
          await this.db.run(`ALTER TABLE ${q(plan.table)} ADD COLUMN IF NOT EXISTS ${q(key)} ${duckdbType(type)}`);
          next[key] = type;
        } else if (stored === storedType(type) || plan.keyColumns.includes(key)) {
          next[key] = type;
        } else {
          // A retyped field: widen to text, which holds every value; never drop. Judged by the
          // table's own column, not by the state (see the PostgreSQL target).
          if (stored !== "VARCHAR") await this.db.run(`ALTER TABLE ${q(plan.table)} ALTER COLUMN ${q(key)} TYPE VARCHAR`);
          next[key] = "text";
        }
      }
      return next;
    });
  }

  async startAppend(plan: TablePlan, datasetKey: string): Promise<boolean> {
    return this.transaction(async () => {
      const empty = (await this.rows(`SELECT NOT EXISTS (SELECT 1 FROM ${q(plan.table)}) AS empty`))[0].empty as boolean;
      if (empty) await this.db.run(`DELETE FROM ${STATE}.touched WHERE dataset_key = ?`, [datasetKey]);
      return empty;
    });
  }

  async writePage(write: PageWrite): Promise<{ rows: number }> {
    let rows = 0;
    await this.transaction(async () => {
      rows = await this.appendStage(STAGE, write.header.length, write.rows);
      const state = write.stateAfter();
      if (rows > 0) await this.upsertFromStage(write.plan, write.header, write.generation, state.key);
      await this.db.run(`DROP TABLE ${STAGE}`);
      await this.saveStateNow(state);
    });
    return { rows };
  }

  /**
   * DuckDB's CSV reader parses the page. `_cursor` is the last column (docs/contract.md): the
   * records go to scratch files as they arrive, counted, the last cursor kept and each cursor
   * replaced by the generation (writeRawPageInParts). Otherwise the page is spooled as it is,
   * staged by read_csv, counted there and upserted, in one transaction with the state.
   */
  async writeRawPage(write: RawPageWrite): Promise<{ rows: number }> {
    if (!this.scratch) throw new Error("the DuckDB target is not open for writing");
    if (write.cursorColumn === write.header.length - 1) return this.writeRawPageInParts(write, this.scratch);
    const file = join(this.scratch, "page.csv");
    let rows = 0;
    try {
      try {
        await pipeline(write.records, createWriteStream(file));
      } catch (err) {
        // A body that failed is a failed page whatever was written.
        write.assertCleanEnd();
        throw err;
      }
      write.assertCleanEnd();
      await this.transaction(async () => {
        await this.db.run(`CREATE OR REPLACE TEMP TABLE ${STAGE} AS SELECT * FROM ${readPageCsv(file, write.header.length)}`);
        const last = await this.rows(`SELECT count(*) OVER () AS n, c${write.cursorColumn} AS cursor FROM ${STAGE} ORDER BY rowid DESC LIMIT 1`);
        rows = Number(last[0]?.n ?? 0);
        const state = write.stateAfter({ rows, lastCursor: (last[0]?.cursor as string | undefined) ?? null });
        if (rows > 0) await this.upsertFromStage(write.plan, write.header, write.generation, state.key);
        await this.db.run(`DROP TABLE ${STAGE}`);
        await this.saveStateNow(state);
      });
    } finally {
      rmSync(file, { force: true });
    }
    return { rows };
  }

  /**
   * A page spooled in parts of about PAGE_PART_BYTES of whole records, each written in a
   * transaction of its own with the state at its last record (statePart; the last part with
   * stateAfter): appended by one INSERT, or staged and upserted. DuckDB holds a transaction's rows
   * in memory until it commits, whatever its memory_limit, so one transaction for a page of very
   * wide rows held the whole page; committed parts are the buffer manager's, which spills them
   * (docs/sync-client.md, "CSV reading"). A part boundary is a page boundary for the rules (a grid
   * submission's rows across it are trimmed as across pages). A failure after some parts committed
   * leaves their rows stored and the state after them: a retry from the page's cursor upserts them
   * again, and on an appended read they are resolved when the read ends, as every appended row
   * served twice is. A caller without statePart gets the page in one part.
   */
  private async writeRawPageInParts(write: RawPageWrite, scratch: string): Promise<{ rows: number }> {
    const counted = new MarkedCursorFieldReplaced(String(write.generation));
    const spool = new PartFiles(join(scratch, "page"), counted.marks, write.statePart ? (this.opts.partBytes ?? PAGE_PART_BYTES) : Infinity);
    try {
      try {
        await pipeline(write.records, counted, spool);
      } catch (err) {
        write.assertCleanEnd();
        throw err;
      }
      write.assertCleanEnd();
      const parts = spool.parts;
      if (parts.length === 0) {
        await this.transaction(() => this.saveStateNow(write.stateAfter({ rows: 0, lastCursor: null })));
        return { rows: 0 };
      }
      for (const [i, part] of parts.entries()) {
        const last = i === parts.length - 1;
        await this.transaction(async () => {
          const source = readPageCsv(part.file, write.header.length);
          const state = last ? write.stateAfter({ rows: part.rows, lastCursor: part.lastCursor }) : write.statePart!({ rows: part.rows, lastCursor: part.lastCursor });
          if (write.append) {
            await this.insertPage(source, write.plan, write.header, write.generation);
          } else {
            await this.db.run(`CREATE OR REPLACE TEMP TABLE ${STAGE} AS SELECT * FROM ${source}`);
            await this.upsertFromStage(write.plan, write.header, write.generation, state.key);
            await this.db.run(`DROP TABLE ${STAGE}`);
          }
          await this.saveStateNow(state);
        });
        rmSync(part.file, { force: true });
      }
      return { rows: parts[parts.length - 1].rows };
    } finally {
      spool.discard();
      for (const part of spool.parts) rmSync(part.file, { force: true });
    }
  }

  /**
   * A spooled page's rows inserted into the dataset's table by one INSERT … SELECT from the CSV
   * reader, typed on the way: no staging table, no key looked up. For an appended page, a key the
   * read meets again (a row edited during the read re-appears on a later page) is stored twice
   * until the read ends: finishDataset then keeps each key's latest row (dropRepeatedKeys).
   */
  private async insertPage(source: string, plan: TablePlan, header: string[], generation: number) {
    const { targets, values } = this.stagedColumns(plan, header);
    await this.db.run(`INSERT INTO ${q(plan.table)} (${targets.join(", ")}, ${q(GENERATION_COLUMN)}) SELECT ${values.join(", ")}, ${Number(generation)} FROM ${source} s`);
  }

  /** Rows into a fresh temporary all-VARCHAR table `c0..cN` by the appender; returns how many. */
  private async appendStage(table: string, columns: number, rows: AsyncIterable<Cell[]>): Promise<number> {
    await this.db.run(`CREATE OR REPLACE TEMP TABLE ${table} (${Array.from({ length: columns }, (_, i) => `c${i} VARCHAR`).join(", ")})`);
    const appender: DuckDBAppender = await this.db.createAppender(table.replace(/^"|"$/g, ""), "main", "temp");
    let count = 0;
    try {
      for await (const row of rows) {
        for (let i = 0; i < columns; i++) {
          const v = row[i];
          if (v === null || v === undefined) appender.appendNull();
          else appender.appendVarchar(v);
        }
        appender.endRow();
        count++;
      }
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
    return count;
  }

  /** The plan's columns present in the header, and the typed expression reading each from the staged page `s`. */
  private stagedColumns(plan: TablePlan, header: string[]) {
    return stagedColumns(plan, header, (i, key) => {
      const type = duckdbType(plan.columns[key]);
      return type === "VARCHAR" ? `s.c${i}` : `CAST(NULLIF(s.c${i}, '') AS ${type})`;
    });
  }

  /**
   * The staged page into the dataset's table: rows of its keys deleted, then the page appended
   * (the last row of a key the page holds twice). DuckDB tables carry no primary-key index: the
   * upsert through one (ON CONFLICT) was a page's slowest step (see docs/sync-client.md, "The
   * copy"), and the delete finds a page's keys by a hash join over the key columns. One transaction, so a key is never seen twice.
   */
  private async upsertFromStage(plan: TablePlan, header: string[], generation: number, datasetKey: string) {
    const { targets, values, keys: staged } = this.stagedColumns(plan, header);
    const valueOf = new Map(staged.map((k, i) => [k, values[i]]));
    const value = (key: string) => valueOf.get(key) ?? "NULL";
    await this.replaceStoredKeys(plan, `${STAGE} s`, value, datasetKey, "true");
    // A column missing from the page is empty for the rows of that page (left to its default, null).
    await this.db.run(
      `INSERT INTO ${q(plan.table)} (${targets.join(", ")}, ${q(GENERATION_COLUMN)})
       SELECT ${values.join(", ")}, ${Number(generation)} FROM ${STAGE} s
       QUALIFY row_number() OVER (PARTITION BY ${plan.keyColumns.map(value).join(", ")} ORDER BY s.rowid DESC) = 1`,
    );
  }

  /**
   * Before a page's rows are added (or, pending, settled): the stored rows of its keys are deleted,
   * and for a grid the ids to trim are recorded. `page` is the page's rows as `s`, `value(key)` a
   * column's typed value there; `stored` tells the stored rows from the page's own (pending ones).
   */
  private async replaceStoredKeys(plan: TablePlan, page: string, value: (key: string) => string, datasetKey: string, stored: string) {
    const table = q(plan.table);
    if (plan.keyColumns.includes("row_index")) {
      // A grid id needs trimming only when the copy held rows of it before this page (replaced or
      // older ones), or an earlier page of this sync recorded it (a submission's rows across a page
      // boundary). Every row of such an id in the page counts for its highest row_index. A first
      // backfill records none.
      await this.db.run(
        `INSERT INTO ${STATE}.touched AS t (dataset_key, id, last_modified, max_row_index)
         SELECT ?, p.id, max(p.last_modified), max(p.row_index)
           FROM (SELECT ${value("id")} AS id, CAST(${value("last_modified")} AS TIMESTAMPTZ) AS last_modified, CAST(${value("row_index")} AS DOUBLE) AS row_index FROM ${page}) p
          WHERE p.id IN (SELECT id FROM ${table} WHERE ${stored}) OR p.id IN (SELECT id FROM ${STATE}.touched WHERE dataset_key = ?)
          GROUP BY p.id
         ON CONFLICT (dataset_key, id) DO UPDATE SET
           max_row_index = CASE WHEN EXCLUDED.last_modified > t.last_modified THEN EXCLUDED.max_row_index ELSE greatest(t.max_row_index, EXCLUDED.max_row_index) END,
           last_modified = greatest(t.last_modified, EXCLUDED.last_modified)`,
        [datasetKey, datasetKey],
      );
    }
    await this.db.run(
      `DELETE FROM ${table} d USING (SELECT DISTINCT ${plan.keyColumns.map((k, i) => `${value(k)} AS k${i}`).join(", ")} FROM ${page}) p
        WHERE ${plan.keyColumns.map((k, i) => `d.${q(k)} = p.k${i}`).join(" AND ")} AND ${stored}`,
    );
  }

  async finishDataset(finish: FinishDataset): Promise<FinishResult> {
    return this.transaction(async () => {
      let trimmed = 0;
      let swept = 0;
      const table = q(finish.plan.table);
      if (await this.wasAppending(finish.state.key)) trimmed += await this.dropRepeatedKeys(finish.plan);
      if (finish.plan.keyColumns.includes("row_index")) {
        trimmed += await this.changed(
          `DELETE FROM ${table} d USING ${STATE}.touched t WHERE t.dataset_key = ? AND d.id = t.id AND d.row_index > t.max_row_index`,
          [finish.state.key],
        );
        await this.db.run(`DELETE FROM ${STATE}.touched WHERE dataset_key = ?`, [finish.state.key]);
      }
      if (finish.sweepBelowGeneration !== null) {
        swept = await this.changed(`DELETE FROM ${table} WHERE ${q(GENERATION_COLUMN)} < ?`, [finish.sweepBelowGeneration]);
      }
      finish.state.rowsDeleted += trimmed + swept;
      await this.saveStateNow(finish.state);
      return { trimmed, swept };
    });
  }

  /** Whether the read ending appended its pages (its stored state says so until finishDataset saves the final one). */
  private async wasAppending(datasetKey: string): Promise<boolean> {
    const stored = await this.rows(`SELECT state FROM ${STATE}.datasets WHERE dataset_key = ?`, [datasetKey]);
    return stored.length > 0 && (JSON.parse(stored[0].state as string) as Partial<DatasetState>).appending === true;
  }

  /**
   * After an appended read, each key stored more than once (a row edited during the read, appended
   * again from a later page) keeps only its latest row: the newest `last_modified`, then the last
   * appended. A grid submission met again is replaced as a set: every row of an id older than the
   * id's newest row goes, those its new version no longer has included. Returns the rows of older
   * versions so dropped (counted as trimmed).
   */
  private async dropRepeatedKeys(plan: TablePlan): Promise<number> {
    const table = q(plan.table);
    const keys = plan.keyColumns.map(q);
    await this.db.run(`CREATE OR REPLACE TEMP TABLE ${REPEATED} AS SELECT ${keys.join(", ")} FROM ${table} GROUP BY ALL HAVING count(*) > 1`);
    if (Number((await this.rows(`SELECT count(*) AS n FROM ${REPEATED}`))[0].n) === 0) {
      await this.db.run(`DROP TABLE ${REPEATED}`);
      return 0;
    }
    const hasLastModified = "last_modified" in plan.columns;
    const lastModified = (alias: string) => `CAST(${alias}.last_modified AS TIMESTAMPTZ)`;
    let dropped = 0;
    if (plan.keyColumns.includes("row_index") && hasLastModified) {
      dropped = await this.changed(
        `DELETE FROM ${table} d USING (SELECT g.id, max(${lastModified("g")}) AS newest FROM ${table} g WHERE g.id IN (SELECT id FROM ${REPEATED}) GROUP BY g.id) n
          WHERE d.id = n.id AND ${lastModified("d")} < n.newest`,
      );
    }
    const latest = hasLastModified ? `${lastModified("t")} DESC NULLS LAST, t.rowid DESC` : "t.rowid DESC";
    await this.db.run(
      `DELETE FROM ${table} WHERE rowid IN (
         SELECT r FROM (SELECT t.rowid AS r, row_number() OVER (PARTITION BY ${keys.map((k) => `t.${k}`).join(", ")} ORDER BY ${latest}) AS n
                          FROM ${table} t SEMI JOIN ${REPEATED} x ON ${keys.map((k) => `t.${k} = x.${k}`).join(" AND ")}) WHERE n > 1)`,
    );
    await this.db.run(`DROP TABLE ${REPEATED}`);
    return dropped;
  }

  async applyTombstones(write: TombstoneWrite): Promise<number> {
    return this.transaction(async () => {
      let deleted = 0;
      if (write.tombstones.length && (await this.tableExists(write.plan.table))) {
        await this.appendStage(TOMBSTONES, 2, (async function* () {
          for (const t of write.tombstones) yield [t.id, t.deletedAt];
        })());
        // A table without last_modified (never the case for the API's datasets) has nothing to compare: the tombstone wins.
        const older = "last_modified" in write.plan.columns ? "(d.last_modified IS NULL OR CAST(d.last_modified AS TIMESTAMPTZ) < CAST(x.c1 AS TIMESTAMPTZ))" : "true";
        deleted = await this.changed(`DELETE FROM ${q(write.plan.table)} d USING ${TOMBSTONES} x WHERE d.id = CAST(x.c0 AS UUID) AND ${older}`);
        await this.db.run(`DROP TABLE ${TOMBSTONES}`);
      }
      write.state.rowsDeleted += deleted;
      await this.saveStateNow(write.state);
      return deleted;
    });
  }

  async trimObsoleteGridRows(gridTable: string, rootTable: string): Promise<number> {
    if (!(await this.tableExists(gridTable)) || !(await this.tableExists(rootTable))) return 0;
    return this.changed(
      `DELETE FROM ${q(gridTable)} g USING ${q(rootTable)} r WHERE g.id = r.id AND CAST(g.last_modified AS TIMESTAMPTZ) < CAST(r.last_modified AS TIMESTAMPTZ)`,
    );
  }

  async saveState(state: DatasetState): Promise<void> {
    await this.saveStateNow(state);
  }

  async saveListingEtag(etag: string | null): Promise<void> {
    await this.db.run(`INSERT OR REPLACE INTO ${STATE}.meta (key, value) VALUES ('listing_etag', ?)`, [etag]);
  }

  async countRows(table: string): Promise<number | null> {
    if (!(await this.tableExists(table))) return null;
    return Number((await this.rows(`SELECT count(*) AS n FROM ${q(table)}`))[0].n);
  }

  /**
   * The export's rows are appended to a temporary table and converted into a temporary copy typed
   * like the copy's table by the expressions a page's upsert uses; both tables are then compared
   * column by column with IS DISTINCT FROM. Rolled back: nothing of it stays.
   */
  async compareContent({ plan, header, rows }: ContentComparison): Promise<ContentDifferences | null> {
    if (!(await this.tableExists(plan.table))) return null;
    const declared = (
      await this.rows("SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? AND database_name = current_database() ORDER BY column_index", [plan.table])
    )
      .map((r) => ({ name: r.column_name as string, type: r.data_type as string }))
      .filter((c) => c.name !== GENERATION_COLUMN);
    const columns = declared.map((c) => c.name);
    const keys = plan.keyColumns.map(q);
    const sameKey = keys.map((k) => `f.${k} = c.${k}`).join(" AND ");
    const differs = columns.map((k) => `f.${q(k)} IS DISTINCT FROM c.${q(k)}`).join(" OR ");
    return this.transaction(async () => {
      await this.appendStage(FRESH_STAGE, header.length, rows);
      const { keys: staged, values } = this.stagedColumns(plan, header);
      const expr = new Map(staged.map((k, i) => [k, values[i].replace(/\bs\./g, "")]));
      await this.db.run(
        `CREATE OR REPLACE TEMP TABLE ${FRESH} AS SELECT ${declared.map((c) => `CAST(${expr.get(c.name) ?? "NULL"} AS ${c.type}) AS ${q(c.name)}`).join(", ")} FROM ${FRESH_STAGE}`,
      );
      // Each exported key once (its first row, and how many times the export returned it).
      await this.db.run(`CREATE OR REPLACE TEMP TABLE ${FRESH_KEYS} AS SELECT ${keys.join(", ")}, count(*) AS n, min(rowid) AS first FROM ${FRESH} GROUP BY ${keys.join(", ")}`);
      const copy = q(plan.table);
      const count = async (sql: string) => Number((await this.rows(sql))[0].n);
      const firstRows = `SELECT f.* FROM ${FRESH_KEYS} d JOIN ${FRESH} f ON f.rowid = d.first`;
      const result: ContentDifferences = {
        sourceRows: await count(`SELECT count(*) AS n FROM ${FRESH}`),
        copyRows: await count(`SELECT count(*) AS n FROM ${copy}`),
        missing: await count(`SELECT count(*) AS n FROM ${FRESH_KEYS} f WHERE NOT EXISTS (SELECT 1 FROM ${copy} c WHERE ${sameKey})`),
        extra: await count(`SELECT count(*) AS n FROM ${copy} c WHERE NOT EXISTS (SELECT 1 FROM ${FRESH_KEYS} f WHERE ${sameKey})`),
        changed: await count(`SELECT count(*) AS n FROM (${firstRows}) f JOIN ${copy} c ON ${sameKey} WHERE ${differs}`),
        duplicated: await count(`SELECT count(*) AS n FROM ${FRESH_KEYS} WHERE n > 1`),
        examples: [],
      };
      const keyText = (row: Record<string, unknown>) => plan.keyColumns.map((k) => `${k}=${String(row[k])}`).join(" ");
      const order = (alias: string) => `ORDER BY ${keys.map((k) => `${alias}.${k}`).join(", ")} LIMIT ${EXAMPLES}`;
      const asText = (alias: string, prefix = "") => columns.map((k) => `CAST(${alias}.${q(k)} AS VARCHAR) AS ${q(prefix + k)}`).join(", ");
      const changed = await this.rows(`SELECT ${asText("f", "f:")}, ${asText("c", "c:")} FROM (${firstRows}) f JOIN ${copy} c ON ${sameKey} WHERE ${differs} ${order("f")}`);
      const examples = [
        ...changed.map((row) => `changed ${keyText(Object.fromEntries(columns.map((k) => [k, row[`f:${k}`]])))} (${columns.filter((k) => row[`f:${k}`] !== row[`c:${k}`]).sort().join(", ")})`),
        ...(await this.rows(`SELECT ${keys.map((k) => `CAST(f.${k} AS VARCHAR) AS ${k}`).join(", ")} FROM ${FRESH_KEYS} f WHERE n > 1 ${order("f")}`)).map((f) => `duplicated ${keyText(f)}`),
        ...(
          await this.rows(`SELECT ${keys.map((k) => `CAST(c.${k} AS VARCHAR) AS ${k}`).join(", ")} FROM ${copy} c WHERE NOT EXISTS (SELECT 1 FROM ${FRESH_KEYS} f WHERE ${sameKey}) ${order("c")}`)
        ).map((c) => `extra ${keyText(c)}`),
        ...(
          await this.rows(`SELECT ${keys.map((k) => `CAST(f.${k} AS VARCHAR) AS ${k}`).join(", ")} FROM ${FRESH_KEYS} f WHERE NOT EXISTS (SELECT 1 FROM ${copy} c WHERE ${sameKey}) ${order("f")}`)
        ).map((f) => `missing ${keyText(f)}`),
      ];
      result.examples = examples.sort().slice(0, EXAMPLES);
      return result;
    }, "discard");
  }

  async close(): Promise<void> {
    this.conn?.closeSync();
    this.instance?.closeSync();
    this.conn = null;
    this.instance = null;
    if (this.scratch) rmSync(this.scratch, { recursive: true, force: true });
    this.scratch = null;
  }

  private async saveStateNow(state: DatasetState): Promise<void> {
    const values = [state.table, JSON.stringify(state), state.key];
    // An UPDATE of the stored row costs half the INSERT OR REPLACE through the key's index (measured per page).
    if ((await this.changed(`UPDATE ${STATE}.datasets SET table_name = ?, state = ?, updated_at = now() WHERE dataset_key = ?`, values)) > 0) return;
    await this.db.run(`INSERT OR REPLACE INTO ${STATE}.datasets (table_name, state, dataset_key, updated_at) VALUES (?, ?, ?, now())`, values);
  }

  /** `discard`: the work only reads (or writes temporary tables), and is rolled back. */
  private async transaction<T>(work: () => Promise<T>, end: "commit" | "discard" = "commit"): Promise<T> {
    await this.db.run("BEGIN TRANSACTION");
    try {
      const result = await work();
      await this.db.run(end === "commit" ? "COMMIT" : "ROLLBACK");
      return result;
    } catch (err) {
      await this.db.run("ROLLBACK").catch(() => undefined);
      throw err;
    }
  }
}

/** Where the records a chunk ends with leave the count: the records so far and the last cursor. */
interface ChunkMark {
  rows: number;
  lastCursor: string | null;
}

/**
 * CursorFieldReplaced, noting with every chunk it passes on (each ends at a record's end) the
 * records counted and the last cursor up to it, in order, for PartFiles.
 */
class MarkedCursorFieldReplaced extends CursorFieldReplaced {
  readonly marks: ChunkMark[] = [];
  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null) this.marks.push({ rows: this.rows, lastCursor: this.lastCursor });
    return super.push(chunk, encoding);
  }
}

/** Chunks of whole records written to files `<prefix>-<n>.csv`, a new file once one holds `partBytes`. */
class PartFiles extends Writable {
  readonly parts: Array<{ file: string; rows: number; lastCursor: string }> = [];
  private fd: number | null = null;
  private bytes = 0;

  constructor(private readonly prefix: string, private readonly marks: ChunkMark[], private readonly partBytes: number) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    try {
      const mark = this.marks.shift();
      if (!mark?.lastCursor) throw new Error("a spooled chunk without its record count");
      if (this.fd === null) {
        const file = `${this.prefix}-${this.parts.length}.csv`;
        this.fd = openSync(file, "w");
        this.parts.push({ file, rows: 0, lastCursor: "" });
        this.bytes = 0;
      }
      for (let at = 0; at < chunk.length; ) at += writeSync(this.fd, chunk, at);
      this.bytes += chunk.length;
      Object.assign(this.parts[this.parts.length - 1], { rows: mark.rows, lastCursor: mark.lastCursor });
      if (this.bytes >= this.partBytes) this.closeFile();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _final(done: (err?: Error | null) => void): void {
    try {
      this.closeFile();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  /** Closes the open file, if any (also after a failure). */
  discard(): void {
    try {
      this.closeFile();
    } catch {
      // already reported by the write that failed
    }
  }

  private closeFile(): void {
    if (this.fd === null) return;
    const fd = this.fd;
    this.fd = null;
    closeSync(fd);
  }
}
