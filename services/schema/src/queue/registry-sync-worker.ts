import { Client, type Pool } from "pg";
import type { Logger } from "@exportsvc/common";
import type { DatasetSyncer } from "../sync/syncer";
import { inTransaction } from "@exportsvc/db";
import { runSyncers } from "../sync/organization-sync";
import { claimQueuedRegistrySync, deleteQueuedRegistrySync, REGISTRY_SYNC_CHANNEL, SERVICE_APPLICATION_NAME } from "@exportsvc/datasets";

const MAX_RECONNECT_DELAY_MS = 30_000;

export interface RegistrySyncWorkerOptions {
  pool: Pool;
  databaseUrl: string;
  syncers: readonly DatasetSyncer[];
  pollMs: number;
  log: Logger;
  /** Organizations synced at once, each in its own transaction on its own pool connection; default 1. */
  concurrency?: number;
}

/**
 * Drains registry_sync_queue: woken by NOTIFY on a dedicated connection (re-established with backoff
 * when lost) and by a poll every pollMs as the fallback. Each queue row is claimed with
 * FOR UPDATE SKIP LOCKED, synced and deleted in one transaction, so several replicas (and the
 * `concurrency` workers of one replica) share the work and a crash leaves the row for the next
 * attempt. The queue holds one row per organization and is taken oldest request first, so every
 * organization waits at most one turn behind the others.
 */
export class RegistrySyncWorker {
  private listener: Client | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectDelayMs = 500;
  private stopped = false;
  private draining: Promise<void> | undefined;
  private drainAgain = false;
  private listenEstablished = false;

  constructor(private readonly options: RegistrySyncWorkerOptions) {}

  start(): void {
    void this.connectListener();
    this.pollTimer = setInterval(() => this.requestDrain(), this.options.pollMs);
    this.requestDrain();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.reconnectTimer);
    const listener = this.listener;
    this.listener = undefined;
    this.listenEstablished = false;
    await listener?.end().catch(() => undefined);
    await this.draining;
  }

  /** Starts a drain, or makes the running one go round again (a NOTIFY may have come after its last claim). */
  requestDrain(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (this.drainAgain) {
        this.drainAgain = false;
        this.requestDrain();
      }
    });
  }

  private async drain(): Promise<void> {
    // Organizations that failed in this drain are left for the next poll instead of spinning on them.
    const failed: string[] = [];
    const work = async () => {
      while (!this.stopped) {
        try {
          const claimed = await this.processOne(failed);
          if (!claimed) return;
        } catch (err) {
          this.options.log.warn({ err }, "registry sync queue: claim failed");
          return;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.options.concurrency ?? 1) }, work));
  }

  /** Claims and syncs one queued organization; false when nothing is claimable. */
  private processOne(failed: string[]): Promise<boolean> {
    const { pool, syncers, log } = this.options;
    let organizationId: string | undefined;
    return inTransaction(pool, async (client) => {
      organizationId = await claimQueuedRegistrySync(client, failed);
      if (organizationId === undefined) return false;
      const changed = await runSyncers(client, organizationId, syncers);
      await deleteQueuedRegistrySync(client, organizationId);
      log.debug({ organizationId, changed }, "registry synced from queue");
      return true;
    }).catch((err) => {
      if (organizationId === undefined) throw err;
      failed.push(organizationId);
      log.error({ err, organizationId }, "registry sync failed; left queued for the next poll");
      return true;
    });
  }

  private async connectListener(): Promise<void> {
    if (this.stopped) return;
    const { databaseUrl, log } = this.options;
    const client = new Client({ connectionString: databaseUrl, application_name: SERVICE_APPLICATION_NAME.schemaRegistryListener });
    const lost = (reason: string, err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      this.listenEstablished = false;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      log.warn({ err, delayMs: this.reconnectDelayMs }, `registry listener lost (${reason}); reconnecting`);
      this.scheduleReconnect();
    };
    client.on("error", (err) => lost("error", err));
    client.on("end", () => lost("end"));
    client.on("notification", (msg) => {
      if (msg.channel === REGISTRY_SYNC_CHANNEL) this.requestDrain();
    });
    try {
      this.listener = client;
      await client.connect();
      await client.query(`LISTEN ${REGISTRY_SYNC_CHANNEL}`);
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.reconnectDelayMs = 500;
      this.listenEstablished = this.listener === client;
      // Anything queued while the listener was down would otherwise wait for the next poll.
      this.requestDrain();
    } catch (err) {
      if (this.listener === client) {
        this.listener = undefined;
        client.end().catch(() => undefined);
      }
      if (this.stopped) return;
      log.warn({ err, delayMs: this.reconnectDelayMs }, "registry listener could not connect; retrying");
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    clearTimeout(this.reconnectTimer);
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, MAX_RECONNECT_DELAY_MS);
    this.reconnectTimer = setTimeout(() => void this.connectListener(), delay);
  }

  /** For tests and health: whether the LISTEN connection is up. */
  get listening(): boolean {
    return this.listenEstablished;
  }

  /** Backend process id of the LISTEN connection (undefined while down). */
  get listenerBackendPid(): number | undefined {
    const client = this.listener as (Client & { processID?: number }) | undefined;
    return this.listenEstablished ? client?.processID : undefined;
  }
}
