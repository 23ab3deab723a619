/** Small helpers the bench scripts share: integer settings from the environment, output, timers, medians. */

/**
 * The integer environment variable `name` (default `def` when unset or empty); at least `min`
 * (default 1: a positive integer), else an error naming the variable.
 */
export function envInt(name: string, def: number, min: 0 | 1 = 1): number {
  const v = process.env[name];
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a ${min === 1 ? "positive" : "non-negative"} integer`);
  return n;
}

/** One line on stdout. */
export const log = (m: string): void => {
  process.stdout.write(`${m}\n`);
};

/** Milliseconds since `start` (a `process.hrtime.bigint()`). */
export const msSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

/** Seconds since `start` (a `process.hrtime.bigint()`). */
export const secondsSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e9;

/** The upper median (the middle element of the sorted values; of an even count, the higher of the two). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
