/**
 * PostgreSQL target. A page is one transaction: its rows are streamed with COPY into a temporary
 * staging table (the connection's own, emptied at commit), upserted into the dataset's table with typed casts, the grid
 * ids it touched are recorded, and the state row is written, then COMMIT. A page appended (a read
 * into a table that was empty when it began) is COPYed straight into the dataset's table instead,
 * its primary key built only when the append ends (ensureKey). The state lives in the
 * schema `dataset_sync`; copies live in the URL's schema (search_path, `public` by default).
 */
import { PassThrough, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Pool, type PoolClient } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { CursorFieldError, CursorFieldReplaced, PAGE_READ_AHEAD_BYTES, type Cell } from "../csv";
import { reviveDatasetState, type DatasetState, type SyncState } from "../state";
import { columnTypes, quoteIdent as q, stagedColumns, STATE_SCHEMA as STATE } from "./sql";
import { AppendRefused, GENERATION_COLUMN, type ContentComparison, type ContentDifferences, type FinishDataset, type FinishResult, type PageWrite, type RawPageWrite, type TablePlan, type Target, type TombstoneWrite } from "./target";

export const postgresType = columnTypes({ text: "text", number: "numeric", boolean: "boolean", dateTime: "timestamptz", localDateTime: "timestamp", date: "date", uuid: "uuid" }, "text");

/** information_schema's udt_name of each type postgresType gives (how a stored column's type is read back). */
const UDT_NAME: Record<string, string> = { text: "text", numeric: "numeric", boolean: "bool", timestamptz: "timestamptz", timestamp: "timestamp", date: "date", uuid: "uuid" };

const WRITER_LOCK = "hashtext('dataset_sync writer')";

export class PostgresTarget implements Target {
  readonly kind = "postgres" as const;
  readonly maxConcurrency = 5;
  private readonly pool: Pool;
  private lockClient: PoolClient | null = null;

  constructor(url: string, poolSize = 6) {
    // Value text forms equal the export's own (PostgreSQL's forms under TimeZone=UTC). A commit does
    // not wait for its WAL flush (synchronous_commit=off): a server crash may lose the last commits,
    // each page's rows together with the state naming its cursor, so the copy resumes from an
    // earlier page and never skips or doubles a row; a page costs one fsync less.
    this.pool = new Pool({
      connectionString: url,
      max: poolSize,
      application_name: "dataset-sync",
      options: "-c TimeZone=UTC -c DateStyle=ISO,YMD -c synchronous_commit=off",
    });
    this.pool.on("error", () => {
      // An idle client lost its connection: the pool replaces it; the next query reports any outage.
    });
  }

  async open({ writer }: { writer: boolean }): Promise<void> {
    if (writer) {
      // The lock lives as long as this connection; losing it must not crash a watch (the next round reconnects).
      this.lockClient = await this.checkout();
      const { rows } = await this.lockClient.query(`SELECT pg_try_advisory_lock(${WRITER_LOCK}) AS locked`);
      if (!rows[0].locked) {
        this.lockClient.release();
        this.lockClient = null;
        throw new Error("another dataset-sync is writing to this target (PostgreSQL advisory lock held)");
      }
      await this.lockClient.query(`CREATE SCHEMA IF NOT EXISTS ${STATE}`);
      await this.lockClient.query(`
        CREATE TABLE IF NOT EXISTS ${STATE}.meta (key text PRIMARY KEY, value text);
        CREATE TABLE IF NOT EXISTS ${STATE}.datasets (dataset_key text PRIMARY KEY, table_name text NOT NULL, state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE IF NOT EXISTS ${STATE}.touched (dataset_key text NOT NULL, id uuid NOT NULL, last_modified timestamptz NOT NULL, max_row_index numeric NOT NULL, PRIMARY KEY (dataset_key, id));`);
    }
  }

  async loadState(): Promise<SyncState> {
    const exists = await this.pool.query(`SELECT to_regclass('${STATE}.datasets') IS NOT NULL AS ok`);
    const datasets = new Map<string, DatasetState>();
    if (!exists.rows[0].ok) return { listingEtag: null, datasets };
    for (const row of (await this.pool.query(`SELECT state FROM ${STATE}.datasets ORDER BY dataset_key`)).rows) {
      const state = reviveDatasetState(row.state);
      datasets.set(state.key, state);
    }
    const meta = await this.pool.query(`SELECT value FROM ${STATE}.meta WHERE key = 'listing_etag'`);
    return { listingEtag: meta.rows[0]?.value ?? null, datasets };
  }

  async ensureTable(plan: TablePlan, applied: Record<string, string>): Promise<Record<string, string>> {
    return this.transaction(async (client) => {
      const cols = Object.entries(plan.columns).map(([key, type]) => `${q(key)} ${postgresType(type)}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${q(plan.table)} (${cols.join(", ")}, ${q(GENERATION_COLUMN)} bigint NOT NULL DEFAULT 0, PRIMARY KEY (${plan.keyColumns.map(q).join(", ")}))`,
      );
      const existing = new Map<string, string>(
        (
          await client.query(
            "SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1",
            [plan.table],
          )
        ).rows.map((r) => [r.column_name, r.udt_name]),
      );
      const next = { ...applied };
      for (const [key, type] of Object.entries(plan.columns)) {
        const stored = existing.get(key);
        if (stored === undefined) {
          await client.query(`ALTER TABLE ${q(plan.table)} ADD COLUMN IF NOT EXISTS ${q(key)} ${postgresType(type)}`);
          next[key] = type;
        } else if (stored === UDT_NAME[postgresType(type)] || plan.keyColumns.includes(key)) {
          next[key] = type;
        } else {
          // A retyped field: widen to text, which holds every value; never drop. Judged by the
          // table's own column, not by the state: a pass that created the table and failed before it
          // saved any state leaves a typed column that the state does not know.
          if (stored !== "text") await client.query(`ALTER TABLE ${q(plan.table)} ALTER COLUMN ${q(key)} TYPE text USING ${q(key)}::text`);
          next[key] = "text";
        }
      }
      return next;
    });
  }

  /**
   * An empty table loses its primary key until the append ends (ensureKey builds it): 500 000 grid
   * rows COPYed into the keyed table cost PostgreSQL 2.9 s of CPU, into the bare table 1.4 s and
   * 0.3 s more to build the key once, by a sort (docs/benchmarks-history.md).
   */
  async startAppend(plan: TablePlan, datasetKey: string): Promise<boolean> {
    return this.transaction(async (client) => {
      const { rows } = await client.query(`SELECT NOT EXISTS (SELECT FROM ${q(plan.table)}) AS empty`);
      if (!rows[0].empty) return false;
      await client.query(`DELETE FROM ${STATE}.touched WHERE dataset_key = $1`, [datasetKey]);
      const key = await primaryKeyName(client, plan.table);
      if (key) await client.query(`ALTER TABLE ${q(plan.table)} DROP CONSTRAINT ${q(key)}`);
      return true;
    });
  }

  async writePage(write: PageWrite): Promise<{ rows: number }> {
    let rows = 0;
    await this.transaction(async (client) => {
      rows = await stageRows(client, write.header.length, write.rows);
      const state = write.stateAfter();
      if (rows > 0) {
        await ensureKey(client, write.plan);
        await upsertFromStage(client, write.plan, write.header, write.generation, state.key);
      }
      await saveStateWith(client, state);
    });
    return { rows };
  }

  /**
   * The records go to COPY … (FORMAT csv) as they arrive: PostgreSQL parses the export's dialect
   * (its own), an unquoted empty field as null and a quoted one as an empty string.
   */
  async writeRawPage(write: RawPageWrite): Promise<{ rows: number }> {
    if (write.append && appendable(write)) return this.appendRawPage(write);
    let rows = 0;
    await this.transaction(async (client) => {
      const stage = await createStage(client, write.header.length);
      const copy = client.query(copyFrom(`COPY ${stage} (${write.header.map((_, i) => `c${i}`).join(", ")}) FROM STDIN (FORMAT csv)`));
      try {
        await pipeline(write.records, copy);
      } catch (err) {
        // A body that failed is a failed page whatever COPY made of it.
        write.assertCleanEnd();
        throw err;
      }
      write.assertCleanEnd();
      const last = await client.query(`SELECT count(*) OVER () AS n, c${write.cursorColumn} AS cursor FROM ${stage} ORDER BY ord DESC LIMIT 1`);
      rows = Number(last.rows[0]?.n ?? 0);
      const state = write.stateAfter({ rows, lastCursor: last.rows[0]?.cursor ?? null });
      if (rows > 0) {
        await ensureKey(client, write.plan);
        await upsertFromStage(client, write.plan, write.header, write.generation, state.key);
      }
      await saveStateWith(client, state);
    });
    return { rows };
  }

  /**
   * An appended page: COPY … (FORMAT csv) straight into the dataset's table, each record's cursor
   * replaced by the generation (CursorFieldReplaced). COPY converts each field as the staged path's
   * casts do (the same input functions), FORCE_NULL making an empty quoted field of a typed column
   * null as NULLIF does there. No staging table, no upsert, no grid ids recorded (see AppendRefused).
   */
  private async appendRawPage(write: RawPageWrite): Promise<{ rows: number }> {
    let rows = 0;
    await this.transaction(async (client) => {
      const columns = write.header.slice(0, write.cursorColumn);
      const typed = columns.filter((key) => postgresType(write.plan.columns[key]) !== "text").map(q);
      const options = typed.length ? `FORMAT csv, FORCE_NULL (${typed.join(", ")})` : "FORMAT csv";
      const records = new CursorFieldReplaced(String(write.generation), write.recordsSeen);
      const copy = client.query(copyFrom(`COPY ${q(write.plan.table)} (${columns.map(q).join(", ")}, ${q(GENERATION_COLUMN)}) FROM STDIN (${options})`));
      try {
        await pipeline(write.records, records, new PassThrough({ highWaterMark: PAGE_READ_AHEAD_BYTES }), copy);
      } catch (err) {
        // The page's own refusal first: it stops a body that is still arriving, which must not pass for one cut short.
        if ((err as { code?: string }).code === UNIQUE_VIOLATION) throw new AppendRefused("a key of the page is stored already");
        if (err instanceof CursorFieldError) throw new AppendRefused(err.message);
        write.assertCleanEnd();
        throw err;
      }
      write.assertCleanEnd();
      rows = records.rows;
      await saveStateWith(client, write.stateAfter({ rows, lastCursor: records.lastCursor }));
    });
    return { rows };
  }

  async finishDataset(finish: FinishDataset): Promise<FinishResult> {
    return this.transaction(async (client) => {
      await ensureKey(client, finish.plan);
      let trimmed = 0;
      let swept = 0;
      const table = q(finish.plan.table);
      if (finish.plan.keyColumns.includes("row_index")) {
        trimmed = (
          await client.query(
            `DELETE FROM ${table} d USING ${STATE}.touched t WHERE t.dataset_key = $1 AND d.id = t.id AND d.row_index > t.max_row_index`,
            [finish.state.key],
          )
        ).rowCount ?? 0;
        await client.query(`DELETE FROM ${STATE}.touched WHERE dataset_key = $1`, [finish.state.key]);
      }
      if (finish.sweepBelowGeneration !== null) {
        swept = (await client.query(`DELETE FROM ${table} WHERE ${q(GENERATION_COLUMN)} < $1`, [finish.sweepBelowGeneration])).rowCount ?? 0;
      }
      finish.state.rowsDeleted += trimmed + swept;
      await saveStateWith(client, finish.state);
      return { trimmed, swept };
    });
  }

  async applyTombstones(write: TombstoneWrite): Promise<number> {
    return this.transaction(async (client) => {
      let deleted = 0;
      if (write.tombstones.length) {
        await ensureKey(client, write.plan);
        // A table without last_modified (never the case for the API's datasets) has nothing to compare: the tombstone wins.
        const older = "last_modified" in write.plan.columns ? "(d.last_modified IS NULL OR d.last_modified::timestamptz < x.deleted_at)" : "true";
        deleted =
          (
            await client.query(
              `DELETE FROM ${q(write.plan.table)} d USING unnest($1::uuid[], $2::timestamptz[]) AS x(id, deleted_at) WHERE d.id = x.id AND ${older}`,
              [write.tombstones.map((t) => t.id), write.tombstones.map((t) => t.deletedAt)],
            )
          ).rowCount ?? 0;
      }
      write.state.rowsDeleted += deleted;
      await saveStateWith(client, write.state);
      return deleted;
    });
  }

  async trimObsoleteGridRows(gridTable: string, rootTable: string): Promise<number> {
    const exists = await this.pool.query("SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS ok", [q(gridTable), q(rootTable)]);
    if (!exists.rows[0].ok) return 0;
    const res = await this.pool.query(
      `DELETE FROM ${q(gridTable)} g USING ${q(rootTable)} r WHERE g.id = r.id AND g.last_modified::timestamptz < r.last_modified::timestamptz`,
    );
    return res.rowCount ?? 0;
  }

  async saveState(state: DatasetState): Promise<void> {
    await saveStateWith(this.pool, state);
  }

  async saveListingEtag(etag: string | null): Promise<void> {
    await this.pool.query(
      `INSERT INTO ${STATE}.meta (key, value) VALUES ('listing_etag', $1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [etag],
    );
  }

  async countRows(table: string): Promise<number | null> {
    const exists = await this.pool.query("SELECT to_regclass($1) IS NOT NULL AS ok", [q(table)]);
    if (!exists.rows[0].ok) return null;
    return Number((await this.pool.query(`SELECT count(*) AS n FROM ${q(table)}`)).rows[0].n);
  }

  /**
   * The export's rows are staged and converted into a temporary copy of the table (`LIKE` it) by
   * the statement a page's upsert uses, then both tables are compared row by row as jsonb (without
   * the generation column). Rolled back: nothing of it stays.
   */
  async compareContent({ plan, header, rows }: ContentComparison): Promise<ContentDifferences | null> {
    const exists = await this.pool.query("SELECT to_regclass($1) IS NOT NULL AS ok", [q(plan.table)]);
    if (!exists.rows[0].ok) return null;
    return this.transaction(async (client) => {
      await stageRows(client, header.length, rows);
      await client.query(`CREATE TEMP TABLE ${q(FRESH)} (LIKE ${q(plan.table)}) ON COMMIT DROP`);
      const { targets, values } = stagedPostgresColumns(plan, header);
      await client.query(`INSERT INTO ${q(FRESH)} (${targets.join(", ")}, ${q(GENERATION_COLUMN)}) SELECT ${values.join(", ")}, 0 FROM ${stageTable(header.length)} s`);
      const keys = plan.keyColumns.map(q).join(", ");
      const doc = `to_jsonb(t) - '${GENERATION_COLUMN.replace(/'/g, "''")}'`;
      await client.query(
        `CREATE TEMP TABLE ${q(JOINED)} ON COMMIT DROP AS
           SELECT ${keys}, f.doc AS fresh, c.doc AS copy, f.n
             FROM (SELECT DISTINCT ON (${keys}) ${keys}, doc, n
                     FROM (SELECT ${keys}, ${doc} AS doc, count(*) OVER (PARTITION BY ${keys}) AS n FROM ${q(FRESH)} t) x
                    ORDER BY ${keys}) f
             FULL JOIN (SELECT ${keys}, ${doc} AS doc FROM ${q(plan.table)} t) c USING (${keys})`,
      );
      const counts = (
        await client.query(
          `SELECT coalesce(sum(n), 0) AS source_rows,
                  count(*) FILTER (WHERE copy IS NOT NULL) AS copy_rows,
                  count(*) FILTER (WHERE copy IS NULL) AS missing,
                  count(*) FILTER (WHERE fresh IS NULL) AS extra,
                  count(*) FILTER (WHERE fresh <> copy) AS changed,
                  count(*) FILTER (WHERE n > 1) AS duplicated
             FROM ${q(JOINED)}`,
        )
      ).rows[0];
      const examples = (
        await client.query(
          `SELECT CASE WHEN copy IS NULL THEN 'missing' WHEN fresh IS NULL THEN 'extra' WHEN n > 1 AND fresh = copy THEN 'duplicated' ELSE 'changed' END AS kind,
                  concat_ws(' ', ${plan.keyColumns.map((k) => `'${k}=' || ${q(k)}::text`).join(", ")}) AS key,
                  (SELECT string_agg(e.key, ', ' ORDER BY e.key) FROM jsonb_each(fresh) e WHERE e.value IS DISTINCT FROM copy -> e.key) AS columns
             FROM ${q(JOINED)}
            WHERE copy IS NULL OR fresh IS NULL OR fresh <> copy OR n > 1
            ORDER BY 1, ${keys}
            LIMIT ${EXAMPLES}`,
        )
      ).rows;
      return {
        sourceRows: Number(counts.source_rows),
        copyRows: Number(counts.copy_rows),
        missing: Number(counts.missing),
        extra: Number(counts.extra),
        changed: Number(counts.changed),
        duplicated: Number(counts.duplicated),
        examples: examples.map((e) => `${e.kind} ${e.key}${e.kind === "changed" && e.columns ? ` (${e.columns})` : ""}`),
      };
    }, "discard");
  }

  async close(): Promise<void> {
    if (this.lockClient) {
      await this.lockClient.query(`SELECT pg_advisory_unlock(${WRITER_LOCK})`).catch(() => undefined);
      this.lockClient.release();
      this.lockClient = null;
    }
    await this.pool.end();
  }

  /** `discard`: the work only reads (or writes temporary tables), and is rolled back. */
  private async transaction<T>(work: (client: PoolClient) => Promise<T>, end: "commit" | "discard" = "commit"): Promise<T> {
    const client = await this.checkout();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query(end === "commit" ? "COMMIT" : "ROLLBACK");
      return result;
    } catch (err) {
      await client.query("ROLLBACK").catch((e: Error) => (broken = e));
      throw err;
    } finally {
      client.release(broken);
    }
  }

  /**
   * A pooled connection whose 'error' events can never crash the process: the listener stays for
   * the connection's life instead of only while we hold it, so no window is left in which a
   * server message (a FATAL 57P01 when PostgreSQL restarts) finds a connection without one. An
   * 'error' event without a listener ends a Node process; the simulation saw the client die so
   * once (seed 34, on a restart), in a window not reproduced since. A lost connection still fails
   * the query in progress, which is how we notice it.
   */
  private async checkout(): Promise<PoolClient> {
    const client = await this.pool.connect();
    if (!guardedClients.has(client)) {
      client.on("error", () => undefined);
      guardedClients.add(client);
    }
    return client;
  }
}

const guardedClients = new WeakSet<PoolClient>();

/**
 * A page's staging table, one per width: a temporary table of the session, emptied by every commit
 * (ON COMMIT DELETE ROWS). Created once per connection instead of once per page: creating and
 * dropping it took 1.8 ms of a page's 3.6 (a changed one-row dataset), and every page left dead
 * rows in the system catalogs.
 */
const stageTable = (columns: number) => q(`sync$stage_${columns}`);
const UNIQUE_VIOLATION = "23505";

/** An append needs the cursor last and every other header column in the plan (COPY maps each field to a column). */
function appendable(write: RawPageWrite): boolean {
  const { header, cursorColumn, plan } = write;
  return cursorColumn === header.length - 1 && header.slice(0, cursorColumn).every((key) => key in plan.columns && key !== GENERATION_COLUMN);
}
/** The table's primary-key constraint, null while a first backfill defers it (startAppend). */
async function primaryKeyName(client: PoolClient, table: string): Promise<string | null> {
  const { rows } = await client.query("SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'", [q(table)]);
  return rows[0]?.conname ?? null;
}

/**
 * Builds the primary key a first backfill deferred, before anything is upserted into the table and
 * when the read ends (finishDataset), in the caller's transaction. Without the key an append cannot
 * refuse a stored key: a row edited during the read and served again on a later page is stored
 * twice. Such rows (the build fails on them) are resolved as upserts would have: of each key, the
 * row written by the latest page stays (the youngest `xmin`: each page is a transaction of its
 * own); of a grid, an id's rows older than its newest version go too (its rows replaced as a set).
 */
async function ensureKey(client: PoolClient, plan: TablePlan): Promise<void> {
  if (await primaryKeyName(client, plan.table)) return;
  const table = q(plan.table);
  const keys = plan.keyColumns.map(q).join(", ");
  const addKey = `ALTER TABLE ${table} ADD PRIMARY KEY (${keys})`;
  await client.query(`SAVEPOINT ${q(KEY_SAVEPOINT)}`);
  try {
    await client.query(addKey);
    await client.query(`RELEASE SAVEPOINT ${q(KEY_SAVEPOINT)}`);
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== UNIQUE_VIOLATION) throw err;
    await client.query(`ROLLBACK TO SAVEPOINT ${q(KEY_SAVEPOINT)}`);
  }
  const replaced = plan.keyColumns.includes("row_index") && "last_modified" in plan.columns ? `last_modified < max(last_modified) OVER (PARTITION BY id)` : "false";
  await client.query(
    `DELETE FROM ${table} d
      USING (SELECT ctid AS at, row_number() OVER (PARTITION BY ${keys} ORDER BY age(xmin), ctid DESC) AS nth, ${replaced} AS replaced FROM ${table}) x
      WHERE d.ctid = x.at AND (x.nth > 1 OR x.replaced)`,
  );
  await client.query(addKey);
}
const KEY_SAVEPOINT = "sync$key";

/** compareContent's temporary tables: the export's rows as the copy's table types them, and both sides joined. */
const FRESH = "sync$fresh";
const JOINED = "sync$compared";
/** Differences compareContent names. */
const EXAMPLES = 5;

/**
 * The page's staging table (stageTable): one text column per header column, `ord` the arrival
 * order; made by the connection's first page of this width (a rolled back page takes its CREATE
 * with it; the next makes it again), empty at the start of every transaction.
 */
async function createStage(client: PoolClient, columns: number): Promise<string> {
  const table = stageTable(columns);
  const staged = Array.from({ length: columns }, (_, i) => `c${i} text`);
  await client.query(`CREATE TEMP TABLE IF NOT EXISTS ${table} (ord bigint GENERATED ALWAYS AS IDENTITY, ${staged.join(", ")}) ON COMMIT DELETE ROWS`);
  return table;
}

/** Stages rows (COPY's text format, in batches) and returns how many there were. */
async function stageRows(client: PoolClient, columns: number, rows: AsyncIterable<Cell[]>): Promise<number> {
  const stage = await createStage(client, columns);
  let count = 0;
  async function* lines(): AsyncGenerator<string> {
    let batch = "";
    for await (const row of rows) {
      count++;
      batch += copyLine(row);
      if (batch.length > 65_536) {
        yield batch;
        batch = "";
      }
    }
    if (batch) yield batch;
  }
  await pipeline(Readable.from(lines()), client.query(copyFrom(`COPY ${stage} (${Array.from({ length: columns }, (_, i) => `c${i}`).join(", ")}) FROM STDIN`)));
  return count;
}

/** The plan's columns present in the header, and the typed expression that reads each from the staged page `s`. */
const stagedPostgresColumns = (plan: TablePlan, header: string[]) =>
  stagedColumns(plan, header, (i, key) => {
    const type = postgresType(plan.columns[key]);
    return type === "text" ? `s.c${i}` : `NULLIF(s.c${i}, '')::${type}`;
  });

/** Upserts the staged page into the dataset's table (typed casts) and records the grid ids it touched. */
async function upsertFromStage(client: PoolClient, plan: TablePlan, header: string[], generation: number, datasetKey: string) {
  const { targets, values } = stagedPostgresColumns(plan, header);
  const inHeader = new Set(header);
  const keys = plan.keyColumns.map(q);
  const updates = targets
    .filter((t) => !keys.includes(t))
    .map((t) => `${t} = EXCLUDED.${t}`)
    // A column missing from the page is empty for the rows of that page.
    .concat(Object.keys(plan.columns).filter((k) => !inHeader.has(k) && !plan.keyColumns.includes(k)).map((k) => `${q(k)} = NULL`))
    .concat([`${q(GENERATION_COLUMN)} = EXCLUDED.${q(GENERATION_COLUMN)}`]);
  const upsert = `INSERT INTO ${q(plan.table)} (${targets.join(", ")}, ${q(GENERATION_COLUMN)})
     SELECT ${values.join(", ")}, $1 FROM ${stageTable(header.length)} s
     ON CONFLICT (${keys.join(", ")}) DO UPDATE SET ${updates.join(", ")}`;
  if (!plan.keyColumns.includes("row_index")) {
    await client.query(upsert, [generation]);
    return;
  }
  // A grid id needs trimming only when the page replaced rows of it (an upsert that updated: xmax
  // set), or when an earlier page of this sync did (a submission's rows across a page boundary).
  // Every row of such an id in the page counts for its highest row_index; an id only inserted has
  // no older rows. A first backfill replaces nothing: no id is recorded.
  await client.query(
    `WITH up AS (${upsert} RETURNING id, row_index, last_modified, xmax <> 0 AS replaced),
          ids AS (SELECT id FROM up GROUP BY id HAVING bool_or(replaced)
                  UNION SELECT t.id FROM ${STATE}.touched t WHERE t.dataset_key = $2 AND t.id IN (SELECT id FROM up))
     INSERT INTO ${STATE}.touched AS t (dataset_key, id, last_modified, max_row_index)
     SELECT $2, up.id, max(up.last_modified::timestamptz), max(up.row_index::numeric) FROM up JOIN ids USING (id) GROUP BY up.id
     ON CONFLICT (dataset_key, id) DO UPDATE SET
       max_row_index = CASE WHEN EXCLUDED.last_modified > t.last_modified THEN EXCLUDED.max_row_index ELSE GREATEST(t.max_row_index, EXCLUDED.max_row_index) END,
       last_modified = GREATEST(t.last_modified, EXCLUDED.last_modified)`,
    [generation, datasetKey],
  );
}

async function saveStateWith(db: Pick<Pool, "query"> | PoolClient, state: DatasetState): Promise<void> {
  await db.query(
    `INSERT INTO ${STATE}.datasets (dataset_key, table_name, state, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (dataset_key) DO UPDATE SET table_name = EXCLUDED.table_name, state = EXCLUDED.state, updated_at = now()`,
    [state.key, state.table, JSON.stringify(state)],
  );
}

/** One row in COPY's text format: tab-separated, \N for null, backslash escapes. */
function copyLine(row: Cell[]): string {
  let line = "";
  for (let i = 0; i < row.length; i++) {
    if (i) line += "\t";
    const v = row[i];
    if (v === null) line += "\\N";
    else line += /[\\\t\n\r]/.test(v) ? v.replace(/[\\\t\n\r]/g, (c) => (c === "\\" ? "\\\\" : c === "\t" ? "\\t" : c === "\n" ? "\\n" : "\\r")) : v;
  }
  return line + "\n";
}
