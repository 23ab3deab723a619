import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";

/** Resolves to whether a TCP listener could bind host:port right now (it is closed again at once). */
export function portIsFree(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A port the kernel hands out as free on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Which process listens on a TCP port, from /proc (Linux; processes this user may inspect). Returns
 * e.g. "pid 4242 (postgres -D /data/pg -p 54320)", or undefined when it cannot be told.
 */
export function describePortOwner(port: number): string | undefined {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the socket inode.
      if (fields.length < 10 || fields[3] !== "0A") continue;
      if (parseInt(fields[1].split(":")[1], 16) === port) inodes.add(fields[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1])) {
        let command = "";
        try {
          command = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
        } catch {
          /* gone meanwhile */
        }
        return `pid ${pid}${command ? ` (${command.length > 160 ? `${command.slice(0, 157)}...` : command})` : ""}`;
      }
    }
  }
  return undefined;
}

/** A port variable (PORT, METRICS_PORT, …): its value, `def` when unset; 0 means any free port. */
export function portFromEnv(name: string, def: number, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name} must be a TCP port (0-65535; 0 = any free port), got '${raw}'`);
  return n;
}

/** `npm start` serves the services' /metrics on METRICS_PORT (default 9464) and the next three, in this order. */
export const METRICS_PORT_ORDER = ["gateway", "catalog", "export", "schema"] as const;
export const DEFAULT_METRICS_PORT = 9464;
