import { readFileSync } from "node:fs";

/** /proc/<pid>/stat counts CPU time in USER_HZ ticks, which Linux fixes at 100 per second for user space. */
const MS_PER_TICK = 10;

/**
 * CPU time (user + system, all threads) a process has used so far, in ms with a 10 ms resolution;
 * undefined where /proc cannot tell (not Linux, or the process is gone). Read it around a stretch of
 * work and subtract.
 */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  return Number.isFinite(ticks) ? ticks * MS_PER_TICK : undefined;
}
