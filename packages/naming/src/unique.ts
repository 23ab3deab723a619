import { MAX_NAME_LENGTH } from "./normalize";

export interface NameCandidate {
  /** Stable identity of what is named (field id, attribute id, ...). */
  sourceId: string;
  /** The candidate's name, already built by directName/composedName. */
  name: string;
}

export interface AssignUniqueNamesOptions {
  /** Names no candidate may take (core columns, reserved words). */
  reserved?: Iterable<string>;
  /** Earlier assignments (sourceId -> name), kept whenever still valid so names stay stable. */
  previous?: ReadonlyMap<string, string> | Record<string, string>;
}

/** `base` with the numeric clash suffix `_n`; the base is truncated so the total stays within the cap. */
export function withNumericSuffix(base: string, n: number): string {
  const suffix = `_${n}`;
  return base.slice(0, MAX_NAME_LENGTH - suffix.length) + suffix;
}

/** Whether `assigned` is what the clash rule can produce for `base` (the base itself or a suffixed form). */
export function isDerivedFrom(assigned: string, base: string): boolean {
  if (assigned === base) return true;
  const match = /_([0-9]+)$/.exec(assigned);
  if (!match) return false;
  const n = Number(match[1]);
  return n >= 2 && String(n) === match[1] && withNumericSuffix(base, n) === assigned;
}

export const toMap = (m: ReadonlyMap<string, string> | Record<string, string> | undefined): ReadonlyMap<string, string> =>
  m === undefined ? new Map() : m instanceof Map ? m : new Map(Object.entries(m));

/**
 * Gives every candidate a name unique within the set and outside `reserved`:
 * 1. a previous assignment is kept when it still derives from the candidate's current name (a
 *    renamed key gets a fresh name) and nobody earlier in this run kept it;
 * 2. candidates whose plain name is free take it, in candidate order ("the plain name goes to the
 *    candidate processed first");
 * 3. the rest get the first free `_2`, `_3`, ... (base truncated so the result stays <= 63).
 * Plain names are handed out before suffixes so a candidate literally named `x_2` keeps it.
 */
export function assignUniqueNames(candidates: readonly NameCandidate[], options: AssignUniqueNamesOptions = {}): Map<string, string> {
  const taken = new Set(options.reserved ?? []);
  const previous = toMap(options.previous);
  const assigned = new Map<string, string>();

  for (const c of candidates) {
    if (assigned.has(c.sourceId)) throw new Error(`duplicate candidate sourceId ${c.sourceId}`);
    const before = previous.get(c.sourceId);
    if (before !== undefined && !taken.has(before) && isDerivedFrom(before, c.name)) {
      assigned.set(c.sourceId, before);
      taken.add(before);
    }
  }
  const pending = candidates.filter((c) => !assigned.has(c.sourceId));
  const clashing: NameCandidate[] = [];
  for (const c of pending) {
    if (taken.has(c.name)) {
      clashing.push(c);
    } else {
      assigned.set(c.sourceId, c.name);
      taken.add(c.name);
    }
  }
  for (const c of clashing) {
    let n = 2;
    while (taken.has(withNumericSuffix(c.name, n))) n++;
    const name = withNumericSuffix(c.name, n);
    assigned.set(c.sourceId, name);
    taken.add(name);
  }
  // Callers iterate the map; keep candidate order rather than assignment order.
  return new Map(candidates.map((c) => [c.sourceId, assigned.get(c.sourceId)!]));
}
