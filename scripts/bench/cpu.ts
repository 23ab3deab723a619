import { machineBusyMs, processCpuMs } from "../lib/proc-stat";

/**
 * Where a measurement's CPU went, in core-seconds: the whole machine (/proc/stat), each named
 * process (/proc/<pid>/stat), this process (process.cpuUsage), and the rest: on a machine that runs
 * nothing else, the PostgreSQL backends (they come and go with the connections, so they are counted
 * as the machine's remainder, not one by one). Linux only; elsewhere every figure is NaN.
 */
export interface CpuSnapshot {
  at: bigint;
  /** The processes named, read again by cpuSince. */
  pids: Record<string, number | undefined>;
  machine: number;
  processes: Record<string, number>;
  self: number;
}

export interface CpuAccount {
  /** Wall-clock seconds between the snapshots. */
  wallSeconds: number;
  machine: number;
  processes: Record<string, number>;
  self: number;
  /** machine − processes − self. */
  rest: number;
}

const seconds = (ms: number | undefined) => (ms === undefined ? NaN : ms / 1000);

export function cpuSnapshot(pids: Record<string, number | undefined>): CpuSnapshot {
  const usage = process.cpuUsage();
  return {
    at: process.hrtime.bigint(),
    pids,
    machine: seconds(machineBusyMs()),
    processes: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, seconds(processCpuMs(pid))])),
    self: (usage.user + usage.system) / 1e6,
  };
}

export function cpuSince(before: CpuSnapshot): CpuAccount {
  const now = cpuSnapshot(before.pids);
  const processes = Object.fromEntries(Object.keys(before.pids).map((name) => [name, now.processes[name] - before.processes[name]]));
  const machine = now.machine - before.machine;
  const self = now.self - before.self;
  const named = Object.values(processes).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  return { wallSeconds: Number(now.at - before.at) / 1e9, machine, processes, self, rest: machine - named - self };
}

/** One line: "cpu 3.10 core-s over 1.80 s: gateway 0.60, export 0.50, …, bench 0.40, rest (PostgreSQL) 1.60". */
export function cpuLine(account: CpuAccount, selfLabel = "bench"): string {
  const f = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "n/a");
  const parts = Object.entries(account.processes).map(([name, s]) => `${name} ${f(s)}`);
  return `cpu ${f(account.machine)} core-s over ${f(account.wallSeconds)} s: ${[...parts, `${selfLabel} ${f(account.self)}`, `rest (PostgreSQL) ${f(account.rest)}`].join(", ")}`;
}
