import { connect, type Socket } from "node:net";
import type { Pool } from "pg";

/**
 * The slow-reader attack of issue 12: sockets that request a large CSV page and never read a byte,
 * so every stream stays open with its buffers full (used by the fairness e2e test and benchmark).
 */
export interface StalledReaders {
  sockets: Socket[];
  /** Destroys every socket (the server sees the clients leave). */
  close(): void;
}

export function openStalledReaders(baseUrl: string, apiKey: string, count: number, path: string): StalledReaders {
  const url = new URL(baseUrl);
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i++) {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${apiKey}\r\n\r\n`);
    });
    // Never read: paused from the start, so the kernel buffers fill and backpressure reaches PostgreSQL.
    socket.pause();
    socket.on("error", () => undefined);
    sockets.push(socket);
  }
  return { sockets, close: () => sockets.forEach((s) => s.destroy()) };
}

/** Page queries (`COPY (...) TO STDOUT`) running for an organization in the current database (parallel workers not counted). */
export async function runningCopies(pool: Pool, organizationId: string): Promise<number> {
  const { rows } = await pool.query(
    `SELECT count(*) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND backend_type = 'client backend'
        AND query LIKE 'COPY%' AND query LIKE $1`,
    [`%${organizationId}%`],
  );
  return Number(rows[0].count);
}

/** Inserts `rows` suppliers of about `rowBytes` bytes of CSV each (a 5000-row page of 8 KiB rows is ~40 MB). */
export async function seedLargeSuppliers(pool: Pool, organizationId: string, rows: number, rowBytes = 8192): Promise<void> {
  await pool.query(
    `INSERT INTO suppliers (organization_id, id, name, description)
     SELECT $1, gen_random_uuid(), 'Supplier ' || g, repeat(md5(g::text), $3::int) FROM generate_series(1, $2::int) g`,
    [organizationId, rows, Math.max(1, Math.round(rowBytes / 32))],
  );
}

export async function waitUntil(condition: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
