import { Client, type Pool, type PoolClient } from "pg";
import { inTransaction } from "@exportsvc/db";
import type { DatasetPlan } from "./derive";
import type { CursorCodec } from "@exportsvc/datasets";
import { createIndexesSql, createTableSql, insertRenderedRowsSql, isDataException, type Conversions } from "./render-sql";
import { signingForNewTable, type StoredCursorSigning } from "./stored-cursors";
import { isTransient, pinTextForms } from "./sql-helpers";

type Queryable = Pick<PoolClient, "query">;

/** A connection outside the pool with the pool's settings, for one rebuild's helper work. */
export async function openHelperClient(pool: Pool): Promise<Client> {
  const client = new Client({ ...pool.options, application_name: pool.options.application_name ?? "form-rebuild" });
  // A helper that loses its connection fails its query; the rebuild reports that, not the process.
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

interface ParallelRender {
  client: PoolClient;
  orgId: string;
  formId: string;
  plans: DatasetPlan[];
  tables: Map<string, string>;
  parallelism: number;
  openHelper: () => Promise<Client>;
  snapshot: string;
  /** Filled with the tables helpers committed (staged until the swap adopts them). */
  staged: string[];
  /** Signs each row's stored `_cursor` (undefined: the tables store none). */
  cursorCodec?: CursorCodec;
}

/**
 * Renders the form's tables on the rebuild's own connection and `parallelism - 1` helpers at once,
 * each taking the next table from one queue (submission dataset first: usually the widest). A
 * helper works in one REPEATABLE READ transaction on the rebuild's snapshot and commits its tables
 * as staged; a helper that cannot connect leaves its share to the others. Waits for every worker before reporting the first failure (a transient one first, so
 * the rebuild is retried rather than marked failed).
 */
export async function materializeInParallel(job: ParallelRender): Promise<void> {
  const queue = [...job.plans];
  // After a failure the rebuild cannot succeed: the other workers finish their table and stop.
  const stopOnFailure = (err: unknown): never => {
    queue.length = 0;
    throw err;
  };
  const own = async () => {
    for (let plan = queue.shift(); plan; plan = queue.shift()) {
      await materialize(job.client, job.orgId, job.formId, plan, job.tables.get(plan.key)!, { staged: false, cursorCodec: job.cursorCodec }).catch(stopOnFailure);
    }
  };
  const helper = async () => {
    if (queue.length === 0) return;
    let conn: Client;
    try {
      conn = await job.openHelper();
    } catch {
      // No connection to spare (max_connections, a pooler's limit): the others take its share.
      return;
    }
    const mine: string[] = [];
    try {
      await inTransaction(
        conn,
        async () => {
          await pinTextForms(conn);
          for (let plan = queue.shift(); plan; plan = queue.shift()) {
            const table = job.tables.get(plan.key)!;
            await materialize(conn, job.orgId, job.formId, plan, table, { staged: true, cursorCodec: job.cursorCodec });
            mine.push(table);
          }
        },
        { isolation: "repeatable read", snapshot: job.snapshot },
      );
      job.staged.push(...mine);
    } catch (err) {
      stopOnFailure(err);
    } finally {
      await conn.end().catch(() => undefined);
    }
  };
  const settled = await Promise.allSettled([own(), ...Array.from({ length: job.parallelism - 1 }, helper)]);
  const failures = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as unknown] : []));
  if (failures.length > 0) throw failures.find(isTransient) ?? failures[0];
}

export async function materialize(
  client: Queryable,
  orgId: string,
  formId: string,
  plan: DatasetPlan,
  table: string,
  opts: { staged: boolean; cursorCodec?: CursorCodec },
): Promise<void> {
  const signing = signingForNewTable(opts.cursorCodec, orgId, plan);
  await client.query(`DROP TABLE IF EXISTS ${table}`);
  await client.query(createTableSql(table, plan, signing));
  await insertRenderedRows(client, orgId, formId, plan, table, signing);
  // Indexes after the bulk insert (one sort each instead of a tree maintained row by row), with
  // enough sort memory that a form of millions of rows does not spill to disk.
  await client.query("SET LOCAL maintenance_work_mem = '256MB'");
  for (const sql of createIndexesSql(table, plan)) await client.query(sql);
  // Statistics of the sort columns only: the export plans on them; the text columns' statistics
  // would cost more than the rest of the build and nothing filters on them. A 3 000-row sample
  // (target 10) is plenty for columns read in index order and is 6x cheaper than the default.
  await client.query("SET LOCAL default_statistics_target = 10");
  await client.query(`ANALYZE ${table} (${plan.gridPath.length > 0 ? "organization_id, last_modified, id, row_index" : "organization_id, last_modified, id"})`);
  await client.query(
    `INSERT INTO form_ds.dataset_tables (organization_id, table_name, dataset_key, form_id, plan, staged, cursor_signature) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (organization_id, table_name) DO UPDATE
       SET dataset_key = excluded.dataset_key, plan = excluded.plan, staged = excluded.staged, cursor_signature = excluded.cursor_signature, retired_at = NULL`,
    [orgId, table, plan.key, formId, serializePlan(plan), opts.staged, signing?.signature ?? null],
  );
}

/**
 * Fills a new table with every row of the dataset. Optimistic conversions first (no regex per date);
 * a malformed date of a recognised shape makes that statement raise, and the rows are rendered again
 * with the guarded conversions, which give the same text for every other value.
 */
async function insertRenderedRows(client: Queryable, orgId: string, formId: string, plan: DatasetPlan, table: string, signing: StoredCursorSigning | undefined): Promise<void> {
  const insert = (conversions: Conversions) => client.query(insertRenderedRowsSql(table, plan, { onlySubmissions: false, conversions, signing }), [orgId, formId]);
  await client.query("SAVEPOINT optimistic_rows");
  try {
    await insert("optimistic");
    await client.query("RELEASE SAVEPOINT optimistic_rows");
  } catch (err) {
    if (!isDataException(err)) throw err;
    await client.query("ROLLBACK TO SAVEPOINT optimistic_rows");
    await insert("guarded");
  }
}

/** The plan as stored: grid children are not needed to render a dataset's own columns. */
export const serializePlan = (plan: DatasetPlan): string => JSON.stringify(plan, (k, v) => (k === "fields" ? undefined : v));
