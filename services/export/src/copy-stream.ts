import type { Pool, PoolClient } from "pg";
import { commandCompleted, CopyTextUnescaper } from "@exportsvc/db";
import { isRenderedPlanStale, PAGE_SESSION_SETTINGS_SQL, type PageStatement } from "@exportsvc/datasets";
import { to as copyTo } from "pg-copy-streams";
import type { StreamSink } from "@exportsvc/rpc";

/** Where CSV bytes go: one gRPC message per chunk, with flow control (packages/rpc's StreamSink). */
export type ChunkSink = StreamSink<Buffer>;

export interface CopyOutcome {
  bytes: number;
  /** Data rows COPY reported (0 when cancelled). */
  rows: number;
  /** True when the consumer went away before the end. */
  cancelled: boolean;
}

/** Raised for a failure after at least one chunk was sent (the response can then only be aborted). */
export class StreamFailedAfterFirstChunk extends Error {
  constructor(readonly cause: unknown) {
    super(`export stream failed after the first chunk: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = "StreamFailedAfterFirstChunk";
  }
}

/**
 * The consumer accepted no chunk for the stall timeout: the query was cancelled and its connection
 * destroyed, so a reader that stopped reading does not keep a PostgreSQL connection.
 */
export class StreamStalled extends Error {
  constructor(readonly bytes: number, readonly stalledMs: number) {
    super(`export consumer accepted nothing for ${stalledMs} ms after ${bytes} bytes`);
    this.name = "StreamStalled";
  }
}

export interface CopyOptions {
  /** Size of the chunks sent (the last one shorter). */
  chunkBytes: number;
  /** Longest wait for the sink to accept a chunk; then the page is aborted (StreamStalled). */
  stallTimeoutMs: number;
}

/**
 * What copyToSink COPYs: a page's statement, and, for one planned on a rendered dataset's state, how
 * to plan the page again should PostgreSQL find that state moved (RENDERED_PLAN_STALE_SQLSTATE: the
 * statement failed before its first row).
 */
export interface CopyStatement extends PageStatement {
  replan?: () => Promise<CopyStatement>;
}

/**
 * Runs `COPY (<select>) TO STDOUT (FORMAT csv)` (or FORMAT text, PageStatement.format) and forwards its bytes, prefixed by `prefix`, in
 * chunks of exactly `chunkBytes` (the last one shorter). Nothing is sent until the first chunk is
 * full or the page is complete, so any failure inside the first chunk reaches the caller as a plain
 * error (the gateway can still answer with a problem response).
 *
 * Backpressure end to end: the loop pulls from the COPY stream (which pauses the PostgreSQL socket)
 * only after the sink accepted the previous chunk. When the consumer goes away the running query is
 * cancelled on the server and the connection is destroyed rather than returned half-read; the same
 * happens when the consumer stays full for `stallTimeoutMs` (it stopped reading).
 */
export async function copyToSink(pool: Pool, statement: CopyStatement, prefix: Buffer, sink: ChunkSink, options: CopyOptions): Promise<CopyOutcome> {
  const client = await pool.connect();
  const connection = { destroy: false };
  try {
    await prepareSession(client);
    for (let planned = statement; ; ) {
      try {
        return await copyOnce(pool, client, connection, planned, prefix, sink, options);
      } catch (err) {
        // Refused before its first row, the connection idle again: the same connection COPYs the new plan.
        if (!planned.replan || !isRenderedPlanStale(err)) throw err;
        connection.destroy = false;
        planned = await planned.replan();
      }
    }
  } catch (err) {
    connection.destroy = true;
    throw err;
  } finally {
    client.release(connection.destroy ? true : undefined);
  }
}

/** One COPY of copyToSink on `client`; sets `connection.destroy` when the connection must not go back to the pool. */
async function copyOnce(pool: Pool, client: PoolClient, connection: { destroy: boolean }, statement: PageStatement, prefix: Buffer, sink: ChunkSink, options: CopyOptions): Promise<CopyOutcome> {
  const { chunkBytes, stallTimeoutMs } = options;
  const { select, format } = statement;
  const unescaper = format === "text" ? new CopyTextUnescaper() : undefined;
  let sentChunks = 0;
  let bytes = 0;
  const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT ${format})`));
  const completed = commandCompleted(stream);

  let cancelled = false;
  // Set before the connection goes back to the pool: from then on its backend serves someone else.
  let finished = false;
  const abortQuery = () => {
    connection.destroy = true;
    cancelBackend(pool, client);
    stream.destroy();
  };
  void sink.gone.then(() => {
    if (cancelled || finished) return;
    cancelled = true;
    abortQuery();
  });

  let pending: Buffer[] = [prefix];
  let pendingBytes = prefix.length;
  const send = async (chunk: Buffer) => {
    bytes += chunk.length;
    sentChunks++;
    if (sink.write(chunk)) return;
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<"stalled">((resolve) => {
      timer = setTimeout(() => resolve("stalled"), stallTimeoutMs);
    });
    try {
      const outcome = await Promise.race([sink.drained(), sink.gone, stalled]);
      if (outcome === "stalled" && !cancelled && !finished) {
        abortQuery();
        throw new StreamStalled(bytes, stallTimeoutMs);
      }
    } finally {
      clearTimeout(timer);
    }
  };

  try {
    for await (const raw of stream as AsyncIterable<Buffer>) {
      if (cancelled) break;
      const data = unescaper ? unescaper.push(raw) : raw;
      pending.push(data);
      pendingBytes += data.length;
      if (pendingBytes < chunkBytes) continue;
      const joined = Buffer.concat(pending, pendingBytes);
      let offset = 0;
      while (joined.length - offset >= chunkBytes && !cancelled) {
        await send(joined.subarray(offset, offset + chunkBytes));
        offset += chunkBytes;
      }
      pending = [joined.subarray(offset)];
      pendingBytes = joined.length - offset;
    }
    if (!cancelled) unescaper?.end();
    if (!cancelled && pendingBytes > 0) await send(Buffer.concat(pending, pendingBytes));
    if (cancelled) return { bytes, rows: 0, cancelled };
    await completed;
    return { bytes, rows: stream.rowCount, cancelled };
  } catch (err) {
    connection.destroy = true;
    if (err instanceof StreamStalled) throw err;
    if (cancelled) return { bytes, rows: 0, cancelled: true };
    throw sentChunks > 0 ? new StreamFailedAfterFirstChunk(err) : err;
  } finally {
    finished = true;
  }
}

const preparedSessions = new WeakSet<PoolClient>();

/** Once per pooled connection: PAGE_SESSION_SETTINGS_SQL. */
async function prepareSession(client: PoolClient): Promise<void> {
  if (preparedSessions.has(client)) return;
  // A checked-out client has no pool listener: a connection dying mid-COPY (backend terminated,
  // network) would be an unhandled 'error' event and take the process down. The running query
  // fails with the same error and is handled by its caller; while idle the pool's listener acts too.
  client.on("error", () => undefined);
  await client.query(PAGE_SESSION_SETTINGS_SQL);
  preparedSessions.add(client);
}

/** Stops the backend's query at once (it may be busy before writing its next row). Best effort. */
function cancelBackend(pool: Pool, client: PoolClient): void {
  const pid = (client as PoolClient & { processID?: number }).processID;
  if (pid) pool.query("SELECT pg_cancel_backend($1)", [pid]).catch(() => undefined);
}
