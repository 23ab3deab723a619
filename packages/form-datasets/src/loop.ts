import type { Pool, PoolClient } from "pg";
import { applyPendingChanges, type ApplyResult } from "./maintain";

export const CHANGES_CHANNEL = "form_dataset_changes";

export interface MaintenanceLoopOptions {
  /** Poll interval when no notification arrives (fallback for lost LISTEN connections). Default 1000 ms. */
  pollIntervalMs?: number;
  /** Change-log rows per transaction. Default 500. */
  batchSize?: number;
  /** Delay before re-establishing a lost LISTEN connection. Default 1000 ms. */
  reconnectDelayMs?: number;
  /** Only this organization's changes (tests, tools); default all organizations. */
  organizationId?: string;
  /** Grace of replaced tables before they are dropped; default 60 s. */
  dropGraceMs?: number;
  /** Tables of one form a rebuild renders at once (helper connections outside the pool); default 3. */
  rebuildParallelism?: number;
  onError?: (err: unknown) => void;
  onApplied?: (result: ApplyResult) => void;
}

export interface MaintenanceLoop {
  /** Runs a pass now (e.g. after a write the caller knows about). */
  wake(): void;
  /** Stops listening and polling, waits for the pass in flight. */
  stop(): Promise<void>;
}

/**
 * Keeps form datasets current: LISTENs on `form_dataset_changes` (the triggers notify in the same
 * transaction as the change) and polls as a fallback; each pass drains the log. Holds one pool
 * connection for LISTEN and up to one more while a pass runs; a rebuild opens up to
 * `rebuildParallelism - 1` helper connections of its own for its duration.
 */
export function startMaintenanceLoop(pool: Pool, opts: MaintenanceLoopOptions = {}): MaintenanceLoop {
  const pollIntervalMs = opts.pollIntervalMs ?? 1000;
  const batchSize = opts.batchSize ?? 500;
  const reconnectDelayMs = opts.reconnectDelayMs ?? 1000;
  const onError = opts.onError ?? (() => undefined);
  let stopped = false;
  let running: Promise<void> | null = null;
  let again = false;
  let listener: PoolClient | null = null;
  let reconnectTimer: NodeJS.Timeout | null = null;

  const drain = async () => {
    do {
      again = false;
      for (;;) {
        if (stopped) return;
        const result = await applyPendingChanges(pool, { batchSize, organizationId: opts.organizationId, dropGraceMs: opts.dropGraceMs, rebuildParallelism: opts.rebuildParallelism });
        if (result.consumed + result.rebuilds + result.droppedTables > 0) opts.onApplied?.(result);
        // A full batch means more may be waiting; deferred rows wait for the next wake or poll.
        if (result.consumed < batchSize) break;
      }
    } while (again && !stopped);
  };

  const wake = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain()
      .catch(onError)
      .finally(() => {
        running = null;
      });
  };

  const listen = async () => {
    if (stopped) return;
    try {
      const client = await pool.connect();
      if (stopped) {
        client.release();
        return;
      }
      listener = client;
      client.on("notification", (msg) => {
        if (msg.channel === CHANGES_CHANNEL) wake();
      });
      client.on("error", (err) => {
        onError(err);
        dropListener(true);
      });
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      // Changes committed before LISTEN took effect are picked up by this pass.
      wake();
    } catch (err) {
      onError(err);
      dropListener(true);
    }
  };

  const dropListener = (reconnect: boolean) => {
    const client = listener;
    listener = null;
    if (client) {
      client.removeAllListeners("notification");
      client.release(true);
    }
    if (reconnect && !stopped && !reconnectTimer) {
      reconnectTimer = setTimeout(() => {
        reconnectTimer = null;
        void listen();
      }, reconnectDelayMs);
    }
  };

  const poller = setInterval(wake, pollIntervalMs);
  poller.unref?.();
  void listen();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(poller);
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const client = listener;
      if (client) {
        listener = null;
        client.removeAllListeners("notification");
        await client.query(`UNLISTEN ${CHANGES_CHANNEL}`).catch(() => undefined);
        client.release();
      }
      await running;
    },
  };
}
