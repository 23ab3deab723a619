import type { Pool, PoolClient } from "pg";
import type { CursorCodec } from "@exportsvc/datasets";
import { applyPendingChanges, emptyApplyResult, maintenanceLagSeconds, organizationFilter, OrganizationRotation, raiseHeldPendingFloors, type ApplyResult, type RebuildReport } from "./maintain";

/** How often a draining loop raises held pending floors again (besides once at the end of each drain). */
export const HELD_FLOOR_RAISE_INTERVAL_MS = 250;

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
  /** Only these organizations' changes (tests); default all organizations. */
  organizationIds?: string[];
  /** Grace of replaced tables before they are dropped; default 60 s. */
  dropGraceMs?: number;
  /** Tables of one form a rebuild renders at once (helper connections outside the pool); default 3. */
  rebuildParallelism?: number;
  /** Signs the rows' stored `_cursor` in rebuilds and maintenance (see RebuildOptions.cursorCodec). */
  cursorCodec?: CursorCodec;
  /**
   * Workers consuming the change log at once, each on its own pool connection (and, while it
   * rebuilds, its own helpers); organizations are served round-robin, so one organization's long
   * queue of rebuilds or submission changes does not hold up another's. Default 1.
   */
  concurrency?: number;
  /**
   * How often the age of the oldest unapplied change is measured (besides after every pass, so a
   * long rebuild or a stuck pass shows as a growing lag); default 10 000 ms.
   */
  lagSampleMs?: number;
  onError?: (err: unknown) => void;
  onApplied?: (result: ApplyResult) => void;
  onRebuild?: (report: RebuildReport) => void;
  /** The measured lag in seconds (0 when caught up); not called while the database cannot be read. */
  onLag?: (seconds: number) => void;
}

export interface MaintenanceLoop {
  /** Runs a pass now (e.g. after a write the caller knows about). */
  wake(): void;
  /** Stops listening and polling, waits for the pass in flight. */
  stop(): Promise<void>;
}

/**
 * Keeps form datasets current: LISTENs on `form_dataset_changes` (the triggers notify in the same
 * transaction as the change) and polls as a fallback; each pass drains the log with `concurrency`
 * workers. Holds one pool connection for LISTEN and up to `concurrency` more while a pass runs; a
 * rebuild opens up to `rebuildParallelism - 1` helper connections of its own for its duration.
 * Each worker step runs at most one rebuild and then one batch of one organization's submission
 * changes, taking organizations in turn (OrganizationRotation).
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

  const concurrency = Math.max(1, opts.concurrency ?? 1);
  const rotation = new OrganizationRotation();

  // Replaced tables are dropped at most once a second, and held pending floors raised again at most
  // every HELD_FLOOR_RAISE_INTERVAL_MS (and once as a drain ends), not after every step of every
  // worker: while writers keep an organization's floors held, each raise finds them held again, and
  // raising hundreds of them per step made a fleet's builds quadratic (issue 15).
  let lastDrop = 0;
  let lastRaise = 0;
  // Steps that left held floors alone since the last raise: a drain that ends with some raises once more.
  let stepsSinceRaise = 0;
  const orgFilter = organizationFilter(opts);
  const work = async () => {
    for (;;) {
      if (stopped) return;
      const dropRetired = Date.now() - lastDrop >= 1000;
      if (dropRetired) lastDrop = Date.now();
      const raiseHeldFloors = Date.now() - lastRaise >= HELD_FLOOR_RAISE_INTERVAL_MS;
      if (raiseHeldFloors) lastRaise = Date.now();
      stepsSinceRaise = raiseHeldFloors ? 0 : stepsSinceRaise + 1;
      const result = await applyPendingChanges(pool, {
        dropRetired,
        raiseHeldFloors,
        batchSize,
        maxRebuilds: 1,
        rotation,
        organizationId: opts.organizationId,
        organizationIds: opts.organizationIds,
        dropGraceMs: opts.dropGraceMs,
        rebuildParallelism: opts.rebuildParallelism,
        cursorCodec: opts.cursorCodec,
        onRebuild: opts.onRebuild,
      });
      if (result.consumed + result.rebuilds + result.droppedTables + result.raisedFloors > 0) opts.onApplied?.(result);
      // A rebuild or a non-empty batch means more may be waiting (a batch holds one organization's
      // changes); an empty step ends this worker. Deferred rows wait for the next wake or poll.
      if (result.rebuilds === 0 && result.consumed === 0) break;
    }
  };

  const drain = async () => {
    do {
      again = false;
      const settled = await Promise.allSettled(Array.from({ length: concurrency }, work));
      const failure = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
      if (failure) throw failure.reason;
      if (!stopped && stepsSinceRaise > 0) {
        lastRaise = Date.now();
        stepsSinceRaise = 0;
        const raisedFloors = await raiseHeldPendingFloors(pool, orgFilter, batchSize);
        if (raisedFloors > 0) opts.onApplied?.({ ...emptyApplyResult(), raisedFloors });
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
      .then(sampleLag)
      .finally(() => {
        running = null;
        // A wake that came after the drain's last look (while the lag was sampled) would otherwise
        // be lost until the next poll: run again for it.
        if (again && !stopped) {
          again = false;
          wake();
        }
      });
  };

  let sampling: Promise<void> | null = null;
  const sampleLag = () => {
    const onLag = opts.onLag;
    if (!onLag || sampling || stopped) return sampling ?? undefined;
    sampling = maintenanceLagSeconds(pool, opts.organizationId)
      .then(onLag, () => {
        // The database is unreachable: the pass reports that through onError; the last value stands.
      })
      .finally(() => {
        sampling = null;
      });
    return sampling;
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
      client.on("error", onListenerError);
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      // Changes committed before LISTEN took effect are picked up by this pass.
      wake();
    } catch (err) {
      onError(err);
      dropListener(true);
    }
  };

  // Only while the loop runs: after stop() the connection is back in the pool (or gone), and what
  // happens to it (a database shutting down) is no failed pass.
  const onListenerError = (err: Error) => {
    if (stopped) return;
    onError(err);
    dropListener(true);
  };

  const dropListener = (reconnect: boolean) => {
    const client = listener;
    listener = null;
    if (client) {
      client.removeAllListeners("notification");
      client.off("error", onListenerError);
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
  const lagSampler = opts.onLag ? setInterval(sampleLag, opts.lagSampleMs ?? 10_000) : null;
  lagSampler?.unref?.();
  void listen();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(poller);
      if (lagSampler) clearInterval(lagSampler);
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const client = listener;
      if (client) {
        listener = null;
        client.removeAllListeners("notification");
        await client.query(`UNLISTEN ${CHANGES_CHANNEL}`).catch(() => undefined);
        client.off("error", onListenerError);
        client.release();
      }
      await running;
      await sampling;
    },
  };
}
