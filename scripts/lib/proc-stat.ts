import { readFileSync } from "node:fs";

/**
 * A process's /proc/<pid>/stat after its command name: [0] is the state (field 3), [1] the parent's
 * pid, [11] and [12] utime and stime (fields 14 and 15). Undefined where /proc cannot tell (not
 * Linux, or the process is gone). The name (field 2) may hold spaces and parentheses, so fields are
 * counted after its last ')'.
 */
export function procStatFields(pid: number): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** /proc/<pid>/stat counts CPU time in USER_HZ ticks, which Linux fixes at 100 per second for user space. */
const MS_PER_TICK = 10;

/**
 * CPU time (user + system, all threads) a process has used so far, in ms with a 10 ms resolution;
 * undefined where /proc cannot tell. Read it around a stretch of work and subtract.
 */
export function processCpuMs(pid: number | undefined): number | undefined {
  const fields = pid === undefined ? undefined : procStatFields(pid);
  const ticks = fields ? Number(fields[11]) + Number(fields[12]) : NaN;
  return Number.isFinite(ticks) ? ticks * MS_PER_TICK : undefined;
}

/**
 * CPU time the whole machine has spent busy so far (every core: user, nice, system, irq, softirq,
 * steal from /proc/stat's first line), in ms; undefined where /proc cannot tell.
 */
export function machineBusyMs(): number | undefined {
  try {
    const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/);
    const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
    const ticks = user + nice + system + irq + softirq + (steal || 0);
    return Number.isFinite(ticks) ? ticks * MS_PER_TICK : undefined;
  } catch {
    return undefined;
  }
}
