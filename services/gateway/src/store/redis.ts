import { EventEmitter } from "node:events";
import { createClient, ErrorReply } from "redis";
import type { SharedStoreStatus } from "../contracts";
import { ADMIT, RENEW, type LuaScript } from "./scripts";
import { SharedStoreUnavailableError, type AdmitResult, type SharedStore } from "./types";

const TRANSIENT_REPLY = /^(OOM|LOADING|BUSY|MASTERDOWN|READONLY|CLUSTERDOWN|TRYAGAIN|NOREPLICAS)\b/;

export interface RedisStoreOptions {
  url: string;
  /** A command not answered within this time counts as Redis being unavailable (ms). */
  commandTimeoutMs?: number;
  /** Connection attempt timeout (ms). */
  connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts and between health probes (ms). */
  maxReconnectDelayMs?: number;
  /** Receives connection errors (the client would otherwise crash the process on 'error'). */
  onError?: (err: Error) => void;
}

/**
 * The Redis-backed store. It never queues work while Redis is away: a command fails at once when the
 * connection is down, and a command that times out marks the store unhealthy until a PING answers
 * again, so callers fall back to in-process state instead of waiting on every request.
 */
export function createRedisStore(options: RedisStoreOptions): SharedStore {
  const commandTimeoutMs = options.commandTimeoutMs ?? 500;
  const maxDelay = options.maxReconnectDelayMs ?? 2000;
  const client = createClient({
    url: options.url,
    disableOfflineQueue: true,
    socket: {
      connectTimeout: options.connectTimeoutMs ?? 2000,
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 10), maxDelay),
    },
  });

  const events = new EventEmitter();
  // Every limiter, authenticator and metrics hook of the process subscribes; that is not a leak.
  events.setMaxListeners(0);
  let connected = false;
  /** Set when a command timed out on an apparently open connection (e.g. Redis hung). */
  let unresponsive = false;
  let closed = false;
  let lastHealthy = false;
  let probe: NodeJS.Timeout | undefined;

  const status = (): SharedStoreStatus => ({ backend: "redis", healthy: connected && !unresponsive && !closed });

  const publish = (reason?: string) => {
    const current = status();
    if (current.healthy !== lastHealthy) {
      lastHealthy = current.healthy;
      events.emit("status", current, reason);
    }
  };

  client.on("ready", () => {
    connected = true;
    publish("connected");
  });
  client.on("end", () => {
    connected = false;
    publish("connection closed");
  });
  client.on("reconnecting", () => {
    connected = false;
    publish("reconnecting");
  });
  client.on("error", (err: Error) => {
    connected = client.isReady;
    publish(err.message);
    options.onError?.(err);
  });

  const withTimeout = <T>(work: Promise<T>, timeoutMs: number): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new SharedStoreUnavailableError(`no answer within ${timeoutMs} ms`)), timeoutMs);
      work.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });

  const startProbing = () => {
    if (probe || closed) return;
    probe = setInterval(() => {
      if (!client.isReady) return;
      withTimeout(client.ping(), commandTimeoutMs).then(
        () => {
          clearInterval(probe);
          probe = undefined;
          unresponsive = false;
          publish("answering again");
        },
        () => undefined,
      );
    }, Math.min(maxDelay, Math.max(100, commandTimeoutMs)));
    probe.unref();
  };

  /** Runs one round trip; every failure that is not Redis answering with an error means "unavailable". */
  const run = async <T>(work: () => Promise<T>): Promise<T> => {
    if (!status().healthy) throw new SharedStoreUnavailableError(closed ? "closed" : unresponsive ? "not answering" : "not connected");
    try {
      return await withTimeout(work(), commandTimeoutMs);
    } catch (err) {
      if (err instanceof ErrorReply) {
        // Redis is there but cannot serve (out of memory, loading, busy script, failover): the same
        // as unavailable for this call; the connection itself stays healthy.
        if (TRANSIENT_REPLY.test(err.message)) throw new SharedStoreUnavailableError(err.message, { cause: err });
        throw err;
      }
      if (err instanceof SharedStoreUnavailableError) {
        unresponsive = true;
        publish(err.message);
        startProbing();
        throw err;
      }
      connected = client.isReady;
      publish((err as Error).message);
      throw new SharedStoreUnavailableError((err as Error).message, { cause: err });
    }
  };

  const evalScript = async (lua: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> => {
    const tail = [String(keys.length), ...keys, ...args.map(String)];
    try {
      return await client.sendCommand(["EVALSHA", lua.sha1, ...tail]);
    } catch (err) {
      if (err instanceof ErrorReply && err.message.startsWith("NOSCRIPT")) {
        return client.sendCommand(["EVAL", lua.source, ...tail]);
      }
      throw err;
    }
  };

  client.connect().catch((err: Error) => options.onError?.(err));

  return {
    backend: "redis",
    status,
    onStatusChange(listener) {
      events.on("status", listener);
      return () => events.off("status", listener);
    },
    ready(timeoutMs) {
      if (status().healthy) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          events.off("status", onStatus);
          resolve(false);
        }, timeoutMs);
        const onStatus = (s: SharedStoreStatus) => {
          if (!s.healthy) return;
          clearTimeout(timer);
          events.off("status", onStatus);
          resolve(true);
        };
        events.on("status", onStatus);
      });
    },
    admit: (req) =>
      run(async (): Promise<AdmitResult> => {
        const reply = (await evalScript(ADMIT, [req.leasesKey, req.windowKey], [req.id, req.maxLeases, req.leaseMs, req.maxInWindow, req.windowMs])) as [number, number | string, number];
        if (Number(reply[0]) === 1) return { admitted: true, leasesHeld: Number(reply[1]), inWindow: Number(reply[2]) };
        return { admitted: false, limit: reply[1] === "window" ? "window" : "concurrency", retryAfterMs: Number(reply[2]) };
      }),
    renewLease: (leasesKey, id, leaseMs) => run(async () => Number(await evalScript(RENEW, [leasesKey], [id, leaseMs])) === 1),
    releaseLease: (leasesKey, id) =>
      run(async () => {
        await client.zRem(leasesKey, id);
      }),
    get: (key) => run(() => client.get(key)),
    set: (key, value, ttlMs) =>
      run(async () => {
        await client.set(key, value, { PX: Math.max(1, Math.round(ttlMs)) });
      }),
    async close() {
      if (closed) return;
      closed = true;
      if (probe) clearInterval(probe);
      publish("closed");
      events.removeAllListeners();
      if (client.isOpen) await client.close().catch(() => client.destroy());
      else client.destroy();
    },
  };
}
