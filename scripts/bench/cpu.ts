import { availableParallelism } from "node:os";
import { machineBusyMs, processCpuMs } from "../lib/proc-stat";
import type { RunningStack } from "../lib/stack";
import { median } from "./helpers";

/**
 * Where a measurement's CPU went, in core-seconds: the whole machine (/proc/stat), each named
 * process (/proc/<pid>/stat), this process (process.cpuUsage), and the rest: on a machine that runs
 * nothing else, the PostgreSQL backends (they come and go with the connections, so they are counted
 * as the machine's remainder, not one by one). Linux only; elsewhere every figure is NaN.
 */
/** Named processes' ids (a stack's services: stackPids), whose CPU a snapshot reads one by one. */
export type ProcessIds = Record<string, number | undefined>;

export interface CpuSnapshot {
  at: bigint;
  /** The processes named, read again by cpuSince. */
  pids: ProcessIds;
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

export function cpuSnapshot(pids: ProcessIds): CpuSnapshot {
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

/** The process ids of a running stack's services, by name, for cpuSnapshot. */
export const stackPids = (stack: Pick<RunningStack, "processes">): ProcessIds =>
  Object.fromEntries(Object.entries(stack.processes).map(([name, child]) => [name, child.pid]));

/**
 * `measure`, noting the CPU each run of it cost, for its ratio's ceiling: `run` measures,
 * `forget` drops what untimed runs noted, `ceiling` is the median over the timed runs of each one's
 * ceiling against its own round's reference rows/s, with the note for its log line.
 */
export function cpuNoted<M extends { rows: number }>(pids: ProcessIds, measure: () => Promise<M>) {
  const accounts: CpuAccount[] = [];
  return {
    run: async (): Promise<M> => {
      const before = cpuSnapshot(pids);
      const measured = await measure();
      accounts.push(cpuSince(before));
      return measured;
    },
    forget: () => void (accounts.length = 0),
    ceiling: (runs: readonly M[], referenceRowsPerSecond: readonly number[]): { ceiling: number; note: string } => {
      const ceiling = median(runs.map((m, i) => cpuCeiling(m.rows, accounts[i], referenceRowsPerSecond[i])));
      return { ceiling, note: ceilingNote(ceiling, median(accounts.map((cpu) => cpu.machine))) };
    },
  };
}

/** The cores the machine gives the bench and every process it measures. */
export const MACHINE_CORES = availableParallelism();

/**
 * The highest ratio over `referenceRowsPerSecond` that moving `rows` could reach at the CPU
 * `account` says it cost: all of it spread over every core, none ever idle, which is as fast as
 * CPU-bound work goes. A ratio well below it was lost to waiting (a latency, one busy thread); one
 * near it can only grow by costing less CPU. A target above it cannot be met on this machine at
 * this cost. NaN where /proc cannot be read.
 */
export function cpuCeiling(rows: number, account: CpuAccount, referenceRowsPerSecond: number): number {
  return rows / (account.machine / MACHINE_CORES) / referenceRowsPerSecond;
}

/** " at its CPU cost at most 0.61x (1.31 core-s on 2 cores)", for a ratio's log line. */
export function ceilingNote(ceiling: number, coreSeconds: number): string {
  if (!Number.isFinite(ceiling)) return "";
  return `; at its CPU cost at most ${ceiling.toFixed(2)}x (${coreSeconds.toFixed(2)} core-s on ${MACHINE_CORES} cores)`;
}
