import { readFileSync } from "node:fs";
import type { Pool } from "pg";
import type { ServiceName } from "../lib/stack";

/**
 * Memory of the run's processes, read where the kernel and the services state it:
 * - a process's resident set and its private (anonymous) part from /proc/<pid>/status (Linux);
 * - a service's V8 heap (in use, reserved) and external memory from its own /metrics (prom-client's
 *   nodejs_heap_size_used_bytes, nodejs_heap_size_total_bytes, nodejs_external_memory_bytes);
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

/** A service's V8 heap as prom-client's default metrics state it (null where unreadable). */
export interface V8Memory {
  /** Live objects (nodejs_heap_size_used_bytes). */
  heapUsedBytes: number | null;
  /** Reserved for the heap (nodejs_heap_size_total_bytes): what a collection can give back. */
  heapTotalBytes: number | null;
  /** Outside the heap: Buffers and other backing stores (nodejs_external_memory_bytes). */
  externalBytes: number | null;
  /** The young generation's part of heapTotalBytes (nodejs_heap_space_size_total_bytes{space="new"}). */
  newSpaceBytes: number | null;
}

/** A service's Prometheus exposition text from its metrics port (throws when it cannot be read). */
export async function metricsText(metricsPort: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(3000) });
  return res.text();
}

export async function v8Memory(metricsPort: number): Promise<V8Memory> {
  try {
    const text = await metricsText(metricsPort);
    const gauge = (name: string, labels = "(?:\\{[^}]*\\})?") => {
      const m = new RegExp(`^${name}${labels} ([0-9.e+]+)$`, "m").exec(text);
      return m ? Number(m[1]) : null;
    };
    return {
      heapUsedBytes: gauge("nodejs_heap_size_used_bytes"),
      heapTotalBytes: gauge("nodejs_heap_size_total_bytes"),
      externalBytes: gauge("nodejs_external_memory_bytes"),
      newSpaceBytes: gauge("nodejs_heap_space_size_total_bytes", '\\{[^}]*space="new"[^}]*\\}'),
    };
  } catch {
    return { heapUsedBytes: null, heapTotalBytes: null, externalBytes: null, newSpaceBytes: null };
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

export interface ServiceMemory extends V8Memory {
  service: ServiceName;
  rssBytes: number | null;
}
