/** Small helpers the bench scripts share: integer settings from the environment, output, timers, medians. */
import { randomUUID } from "node:crypto";
import type { FormField } from "@exportsvc/form-datasets";

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

/**
 * A cost measured with and without something (a trigger, a feature): `rounds` pairs, the order
 * alternating between rounds so neither side always runs on warmer caches, after one untimed warm-up
 * of the "with" side. Logs both series, their medians and the ratio of the medians, and returns it.
 */
export async function compareWithWithout(what: string, rounds: number, run: (enabled: boolean) => Promise<number>): Promise<number> {
  await run(true);
  const timed: Record<"with" | "without", number[]> = { with: [], without: [] };
  for (let i = 0; i < rounds; i++) {
    for (const enabled of i % 2 === 0 ? [true, false] : [false, true]) timed[enabled ? "with" : "without"].push(await run(enabled));
  }
  const width = `without ${what}:`.length;
  for (const side of ["with", "without"] as const) {
    const xs = timed[side];
    log(`    ${`${side} ${what}:`.padEnd(width)} ${xs.map((x) => x.toFixed(0)).join(", ")} ms (median ${median(xs).toFixed(0)})`);
  }
  const ratio = median(timed.with) / median(timed.without);
  log(`    ratio with/without: ${ratio.toFixed(2)}`);
  return ratio;
}

/** A field of a bench form: a random id, its key as label. */
export const benchField = (type: string, key: string, extra: Partial<FormField> = {}): FormField => ({ id: randomUUID(), key, label: key, type, ...extra });

/**
 * The scalar fields both form benches (bench:forms, bench:form-pages) start their form with, one of
 * each kind the export renders differently; `temperature` takes the caller's extras.
 */
export const benchScalarFields = (temperature: Partial<FormField> = {}): FormField[] => [
  benchField("text", "operator"),
  benchField("paragraph", "notes"),
  benchField("number", "temperature", temperature),
  benchField("yesNo", "passed"),
  benchField("date", "production_date"),
  benchField("dateTime", "sampled_at"),
  benchField("select", "line", { options: [{ key: "l1", label: "Line 1" }, { key: "l2", label: "Line 2" }] }),
  benchField("checkboxGroup", "allergens", { options: ["milk", "egg", "nuts", "soy"].map((k) => ({ key: k, label: k })) }),
  benchField("signature", "approver"),
];
