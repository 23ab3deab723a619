import { readFileSync } from "node:fs";
import type { Pool } from "pg";
import type { ServiceName } from "../lib/stack";

/**
 * Memory of the run's processes, read where the kernel and the services state it:
 * - a process's resident set and its private (anonymous) part from /proc/<pid>/status (Linux);
 * - a service's V8 heap in use from its own /metrics (prom-client's nodejs_heap_size_used_bytes);
 * - PostgreSQL: connections by application_name, and each backend's private memory (RssAnon of its
 *   process: its caches, sort and hash memory, not the shared buffers it maps).
 */
export interface ProcMemory {
  rssBytes: number;
  anonBytes: number;
}

export function procMemory(pid: number | undefined): ProcMemory | null {
  if (!pid) return null;
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
    return { rssBytes: kb("VmRSS"), anonBytes: kb("RssAnon") };
  } catch {
    return null; // gone (a fault killed it) or not Linux
  }
}

export async function heapUsedBytes(metricsPort: number): Promise<number | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(3000) });
    const text = await res.text();
    const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([0-9.e+]+)$/m.exec(text);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export interface BackendGroup {
  /** application_name of the pool (the services name theirs). */
  application: string;
  connections: number;
  /** Private memory of its backends, summed and the largest one. */
  anonBytes: number;
  maxAnonBytes: number;
}

export async function postgresBackends(pool: Pool): Promise<BackendGroup[]> {
  const { rows } = await pool.query<{ application: string; pid: number }>(
    `SELECT coalesce(nullif(application_name, ''), '(unnamed)') AS application, pid
       FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  const groups = new Map<string, BackendGroup>();
  for (const r of rows) {
    const g = groups.get(r.application) ?? { application: r.application, connections: 0, anonBytes: 0, maxAnonBytes: 0 };
    g.connections++;
    const mem = procMemory(r.pid);
    if (mem && Number.isFinite(mem.anonBytes)) {
      g.anonBytes += mem.anonBytes;
      g.maxAnonBytes = Math.max(g.maxAnonBytes, mem.anonBytes);
    }
    groups.set(r.application, g);
  }
  return [...groups.values()].sort((a, b) => a.application.localeCompare(b.application));
}

export interface ServiceMemory {
  service: ServiceName;
  rssBytes: number | null;
  heapUsedBytes: number | null;
}
