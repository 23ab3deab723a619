import { EventEmitter } from "node:events";
import type { FallbackEvent } from "../contracts";
import { createMemoryStore } from "./memory";
import { isSharedStoreUnavailable, type Clock, type SharedStore } from "./types";

export interface FallbackRouter {
  /**
   * Runs an operation on the shared store, or on this replica's own store while the shared one is
   * unavailable. Returns the store that answered, so later calls about the same thing (renewing or
   * releasing a lease) go to the same place.
   */
  run<T>(operation: (store: SharedStore) => Promise<T>): Promise<{ value: T; store: SharedStore }>;
  fallbackActive(): boolean;
  /** Called on every switch; a listener subscribing while the fallback is active is told at once. */
  onFallback(listener: (event: FallbackEvent) => void): () => void;
  close(): Promise<void>;
}

/**
 * Keeps requests flowing while Redis is down: operations go to an in-process store with the same
 * semantics, so each replica enforces the limits on its own until Redis answers again. A store that
 * is already in-process needs no fallback.
 */
export function withLocalFallback(shared: SharedStore, options: { clock?: Clock } = {}): FallbackRouter {
  const events = new EventEmitter();
  if (shared.backend === "memory") {
    return {
      run: async (operation) => ({ value: await operation(shared), store: shared }),
      fallbackActive: () => false,
      onFallback: () => () => undefined,
      close: async () => undefined,
    };
  }

  const local = createMemoryStore({ clock: options.clock });
  let active = !shared.status().healthy;
  const unsubscribe = shared.onStatusChange((status, reason) => {
    if (active === !status.healthy) return;
    active = !status.healthy;
    events.emit("fallback", { active, reason } satisfies FallbackEvent);
  });

  return {
    async run(operation) {
      if (shared.status().healthy) {
        try {
          return { value: await operation(shared), store: shared };
        } catch (err) {
          if (!isSharedStoreUnavailable(err)) throw err;
        }
      }
      return { value: await operation(local), store: local };
    },
    fallbackActive: () => active,
    onFallback(listener) {
      events.on("fallback", listener);
      // A subscriber joining during an outage (e.g. Redis down at start-up) learns of it at once.
      if (active) listener({ active: true, reason: "shared store not available" });
      return () => events.off("fallback", listener);
    },
    async close() {
      unsubscribe();
      events.removeAllListeners();
      await local.close();
    },
  };
}
