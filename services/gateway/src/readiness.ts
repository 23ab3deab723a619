import type { Pool } from "pg";
import { pingDatabase } from "@exportsvc/db";
import type { DatabaseProbe } from "./routes/open";

/**
 * Readiness probes the gateway's own database (the key store) and nothing else: a `SELECT 1` that
 * must answer within timeoutMs, so a hung connection attempt fails the probe instead of stalling it.
 */
export function databaseProbe(pool: Pool, timeoutMs: number): DatabaseProbe {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`database did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([pingDatabase(pool), timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
}
