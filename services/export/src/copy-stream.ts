import type { Pool, PoolClient } from "pg";
import { to as copyTo } from "pg-copy-streams";

/** Where CSV bytes go: one gRPC message per chunk, with flow control. */
export interface ChunkSink {
  /** False: the sink's buffer is full; wait for drained() before writing more. */
  write(chunk: Buffer): boolean;
  drained(): Promise<void>;
  /** Resolves when the consumer is gone (cancel, deadline, disconnect). */
  readonly gone: Promise<void>;
  isGone(): boolean;
}

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
 * Runs `COPY (<select>) TO STDOUT (FORMAT csv)` and forwards its bytes, prefixed by `prefix`, in
 * chunks of exactly `chunkBytes` (the last one shorter). Nothing is sent until the first chunk is
 * full or the page is complete, so any failure inside the first chunk reaches the caller as a plain
 * error (the gateway can still answer with a problem response).
 *
 * Backpressure end to end: the loop pulls from the COPY stream (which pauses the PostgreSQL socket)
 * only after the sink accepted the previous chunk. When the consumer goes away the running query is
 * cancelled on the server and the connection is destroyed rather than returned half-read.
 */
export async function copyToSink(pool: Pool, select: string, prefix: Buffer, sink: ChunkSink, chunkBytes: number): Promise<CopyOutcome> {
  const client = await pool.connect();
  await prepareSession(client).catch((err) => {
    client.release(true);
    throw err;
  });
  let destroyConnection = false;
  let sentChunks = 0;
  let bytes = 0;
  const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT csv)`));
  const completed = commandCompleted(stream);

  let cancelled = false;
  // Set before the connection goes back to the pool: from then on its backend serves someone else.
  let finished = false;
  void sink.gone.then(() => {
    if (cancelled || finished) return;
    cancelled = true;
    destroyConnection = true;
    cancelBackend(pool, client);
    stream.destroy();
  });

  let pending: Buffer[] = [prefix];
  let pendingBytes = prefix.length;
  const send = async (chunk: Buffer) => {
    bytes += chunk.length;
    sentChunks++;
    if (!sink.write(chunk)) await Promise.race([sink.drained(), sink.gone]);
  };

  try {
    for await (const data of stream as AsyncIterable<Buffer>) {
      if (cancelled) break;
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
    if (!cancelled && pendingBytes > 0) await send(Buffer.concat(pending, pendingBytes));
    if (cancelled) return { bytes, rows: 0, cancelled };
    await completed;
    return { bytes, rows: stream.rowCount, cancelled };
  } catch (err) {
    destroyConnection = true;
    if (cancelled) return { bytes, rows: 0, cancelled: true };
    throw sentChunks > 0 ? new StreamFailedAfterFirstChunk(err) : err;
  } finally {
    finished = true;
    client.release(destroyConnection ? true : undefined);
  }
}

/**
 * Resolves once PostgreSQL reported the end of the statement (CommandComplete, then ReadyForQuery).
 * The COPY stream ends at CopyDone, which can arrive in an earlier packet: rowCount is only known after.
 */
export function commandCompleted(stream: ReturnType<typeof copyTo>): Promise<void> {
  return new Promise((resolve) => {
    const target = stream as unknown as { handleReadyForQuery(connection: unknown): void };
    const original = target.handleReadyForQuery.bind(stream);
    target.handleReadyForQuery = (connection) => {
      original(connection);
      resolve();
    };
  });
}

const preparedSessions = new WeakSet<PoolClient>();

/**
 * Once per pooled connection. JIT off: page queries are short and their many per-row subplans
 * inflate cost estimates, so JIT compilation would cost more than the page itself.
 */
async function prepareSession(client: PoolClient): Promise<void> {
  if (preparedSessions.has(client)) return;
  // A checked-out client has no pool listener: a connection dying mid-COPY (backend terminated,
  // network) would be an unhandled 'error' event and take the process down. The running query
  // fails with the same error and is handled by its caller; while idle the pool's listener acts too.
  client.on("error", () => undefined);
  await client.query("SET jit = off");
  preparedSessions.add(client);
}

/** Stops the backend's query at once (it may be busy before writing its next row). Best effort. */
function cancelBackend(pool: Pool, client: PoolClient): void {
  const pid = (client as PoolClient & { processID?: number }).processID;
  if (pid) pool.query("SELECT pg_cancel_backend($1)", [pid]).catch(() => undefined);
}
