import { escapeLiteral, type ClientBase, type Pool, type PoolClient } from "pg";

export type IsolationLevel = "read committed" | "repeatable read" | "serializable";

export interface TransactionOptions {
  /** Default: the session's (read committed unless configured otherwise). */
  isolation?: IsolationLevel;
  readOnly?: boolean;
  /**
   * A snapshot exported by another transaction (`pg_export_snapshot()`): this one then reads the
   * database exactly as that one does. PostgreSQL requires repeatable read or serializable for it.
   */
  snapshot?: string;
}

/** A pool (a connection is checked out for the transaction) or a connection the caller holds. */
export type TransactionTarget = Pool | ClientBase;

// By shape, not instanceof: a workspace may resolve its own copy of pg.
const isPool = (target: TransactionTarget): target is Pool => typeof (target as Pool).totalCount === "number";

/** `BEGIN` with the options as its transaction modes (`BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`). */
export function beginStatement(opts: TransactionOptions = {}): string {
  const modes: string[] = [];
  if (opts.isolation) modes.push(`ISOLATION LEVEL ${opts.isolation.toUpperCase()}`);
  if (opts.readOnly) modes.push("READ ONLY");
  return modes.length > 0 ? `BEGIN ${modes.join(", ")}` : "BEGIN";
}

/**
 * Runs `body` in one transaction: COMMIT when it resolves, ROLLBACK when it throws (the body's
 * error is rethrown; a failed ROLLBACK does not hide it). Given a pool, the transaction runs on a
 * connection of its own, released afterwards; one whose ROLLBACK failed is discarded rather than
 * handed to the next caller in an unknown state. Given a connection, the caller keeps it (for work
 * after the commit, or a helper connection it ends itself).
 */
export function inTransaction<T>(pool: Pool, body: (client: PoolClient) => Promise<T>, opts?: TransactionOptions): Promise<T>;
export function inTransaction<T, C extends ClientBase>(client: C, body: (client: C) => Promise<T>, opts?: TransactionOptions): Promise<T>;
export async function inTransaction<T>(
  target: TransactionTarget,
  // Each overload pairs the target with the client type its body receives.
  body: (client: never) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  if (!isPool(target)) return transact(target, body, opts, () => undefined);
  const client = await target.connect();
  let broken: Error | undefined;
  try {
    return await transact(client, body, opts, (err) => (broken = err));
  } finally {
    client.release(broken);
  }
}

async function transact<T>(
  client: ClientBase,
  body: (client: never) => Promise<T>,
  opts: TransactionOptions,
  onRollbackFailed: (err: Error) => void,
): Promise<T> {
  try {
    await client.query(beginStatement(opts));
    if (opts.snapshot !== undefined) await client.query(`SET TRANSACTION SNAPSHOT ${escapeLiteral(opts.snapshot)}`);
    const result = await body(client as never);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(onRollbackFailed);
    throw err;
  }
}
