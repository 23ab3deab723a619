/**
 * A target database holding the copy and the sync state. One implementation per database; the
 * engine never writes SQL.
 */
import type { Cell } from "../csv";
import type { DatasetState, SyncState } from "../state";

/** How a dataset's table looks: key columns and each column's listing dataType. */
export interface TablePlan {
  table: string;
  /** ["id"] or ["id", "row_index"] (grid datasets). */
  keyColumns: string[];
  /** Column key → dataType (unknown types are stored as text). */
  columns: Record<string, string>;
}

export interface PageWrite {
  plan: TablePlan;
  /** The page's header without `_cursor` positions removed: aligned with each row. */
  header: string[];
  rows: AsyncIterable<Cell[]>;
  /** Generation stamped on every row written. */
  generation: number;
  /** See {@link AppendRefused}. */
  append: boolean;
  /** Called after the last row was consumed: the state to commit with the rows. */
  stateAfter(): DatasetState;
}

/** A page whose records the target's database parses itself (the header already read). */
export interface RawPageWrite {
  plan: TablePlan;
  header: string[];
  /** Raw CSV records in the export's dialect. */
  records: NodeJS.ReadableStream;
  /** Called once the records are loaded, before anything is upserted: throws if the body did not end cleanly. */
  assertCleanEnd(): void;
  /** Position of `_cursor` in the header. */
  cursorColumn: number;
  generation: number;
  /** See {@link AppendRefused}. */
  append: boolean;
  stateAfter(page: { rows: number; lastCursor: string | null }): DatasetState;
  /**
   * The state after the page's first `rows` records, for a target that commits an appended page in
   * parts (each with the state at its last record: a resume continues after it). Not a page done:
   * stateAfter still ends the page.
   */
  statePart?(part: { rows: number; lastCursor: string }): DatasetState;
  /**
   * Called, where the target can tell, as soon as every record of the body has been seen, before
   * they are all written: the engine asks for the next page then, so the export produces it while
   * this one is still being written.
   */
  recordsSeen?(page: { rows: number; lastCursor: string | null }): void;
}

/**
 * A page written with `append` (a read from the beginning into a table that held no row when it
 * began, no earlier page of it having met a stored key) may insert its rows without conflict
 * handling and without recording grid ids for trimming: nothing of a key it inserts was stored
 * before. A target that deferred the table's key (startAppend) stores a row served twice (a
 * submission edited during the read re-appears on a later page) twice and resolves it when it
 * builds the key, as the upserts would have. A target whose table keeps its key fails such a page
 * with this error (for a grid the re-served rows always include row 1), rolled back; the engine
 * reads the page again without `append`, and the rest of the read upserts as usual.
 */
export class AppendRefused extends Error {
  constructor(reason: string) {
    super(`page not appended: ${reason}`);
    this.name = "AppendRefused";
  }
}

export interface FinishDataset {
  plan: TablePlan;
  state: DatasetState;
  /** A full read ended: delete rows of older generations. */
  sweepBelowGeneration: number | null;
}

export interface FinishResult {
  /** Grid rows above the highest row_index seen for a touched id. */
  trimmed: number;
  /** Rows the full read did not see. */
  swept: number;
}

/** One page of a dataset's deletion feed, applied in one transaction with the state (its new deletions cursor). */
export interface TombstoneWrite {
  plan: TablePlan;
  tombstones: Array<{ id: string; deletedAt: string }>;
  state: DatasetState;
}

/** A fresh full export of a dataset, to compare with the copy's table. */
export interface ContentComparison {
  /** The copy's table: its name, key columns and the column types it was written with. */
  plan: TablePlan;
  /** The export's header (`_cursor` included): aligned with each row. */
  header: string[];
  /** Every row of the export, page after page. */
  rows: AsyncIterable<Cell[]>;
}

/**
 * How the copy differs from the export. Each exported row is converted exactly as a sync writes it
 * (same column types, same conversions), so a row that a sync would store unchanged is equal.
 */
export interface ContentDifferences {
  sourceRows: number;
  copyRows: number;
  /** Rows of the export with no row of that key in the copy. */
  missing: number;
  /** Rows of the copy whose key the export did not return. */
  extra: number;
  /** Rows present on both sides whose values differ (any column, `last_modified` included). */
  changed: number;
  /** Keys the export returned more than once. */
  duplicated: number;
  /** A few of the differences, e.g. `changed id=… (name, city)`. */
  examples: string[];
}

export interface Target {
  readonly kind: "postgres" | "sqlite" | "duckdb";
  /** Datasets synced at once at most (SQLite, DuckDB: one writer). */
  readonly maxConcurrency: number;
  /** Creates the state tables if needed. `writer`: this process will write (takes the target's writer lock). */
  open(opts: { writer: boolean }): Promise<void>;
  loadState(): Promise<SyncState>;
  /** Creates the table or adds missing columns, widening a column whose type changed to text; never drops. */
  ensureTable(plan: TablePlan, applied: Record<string, string>): Promise<Record<string, string>>;
  /**
   * Asked when a read starts from the beginning: may its pages be appended? True when the table holds
   * no row; the dataset's touched grid ids (they describe rows no longer stored) are then forgotten,
   * and the target may drop the table's key until the append ends: it must build it again (in the
   * same transaction) before it upserts into, deletes tombstones from or finishes the table, so a
   * resume after a kill finds the key whenever it writes otherwise than by appending.
   * Absent: pages are always upserted.
   */
  startAppend?(plan: TablePlan, datasetKey: string): Promise<boolean>;
  /** One transaction: the page's rows (upserts), the touched grid ids, the state. */
  writePage(write: PageWrite): Promise<{ rows: number }>;
  /** Optional fast path: the same transaction as writePage, the records parsed by the database. */
  writeRawPage?(write: RawPageWrite): Promise<{ rows: number }>;
  /** One transaction: grid trimming, the full read's sweep, the state. */
  finishDataset(finish: FinishDataset): Promise<FinishResult>;
  /**
   * One transaction: delete every stored row (grid datasets: every row) with a tombstone's id whose
   * `last_modified` is older than the tombstone's `deleted_at` (a re-created row is kept), and save
   * the state. Returns the rows deleted.
   */
  applyTombstones(write: TombstoneWrite): Promise<number>;
  /**
   * Deletes grid rows older than their submission's row in the root (submission) dataset: grid rows
   * share `id` and `last_modified` with their submission, so a newer submission row means those grid
   * rows were replaced (re-served with the new last_modified) or removed (a grid emptied). Returns
   * the rows deleted (0 when either table does not exist yet).
   */
  trimObsoleteGridRows(gridTable: string, rootTable: string): Promise<number>;
  saveState(state: DatasetState): Promise<void>;
  saveListingEtag(etag: string | null): Promise<void>;
  countRows(table: string): Promise<number | null>;
  /**
   * Compares the copy's table with a fresh export, changing nothing (the export's rows go to a
   * temporary table that is discarded). Null when the table does not exist.
   */
  compareContent(comparison: ContentComparison): Promise<ContentDifferences | null>;
  close(): Promise<void>;
}

/** Column types of a target (listing dataType → column type); unknown types are text. */
export type TypeMap = Record<string, string>;

/** The copy's own bookkeeping column on every table (a name the API's naming rules cannot produce). */
export const GENERATION_COLUMN = "_sync$generation";
