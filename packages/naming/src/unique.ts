import { MAX_NAME_LENGTH } from "./normalize";

export interface NameCandidate {
  /** Stable identity of what is named (field id, attribute id, ...). */
  sourceId: string;
  /** The candidate's name, already built by directName/composedName. */
  name: string;
}

/** Earlier assignments (sourceId -> name), kept whenever still valid so names stay stable. */
export type PreviousNames = ReadonlyMap<string, string> | Record<string, string>;

export interface AssignUniqueNamesOptions {
  /** Names no candidate may take (core columns, reserved words). */
  reserved?: Iterable<string>;
  previous?: PreviousNames;
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

export const toMap = (m: PreviousNames | undefined): ReadonlyMap<string, string> =>
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
  return assignInThreePasses(candidates, {
    taken: options.reserved,
    previous: options.previous,
    keepsPrevious: (c, before, taken) => !taken.has(before) && isDerivedFrom(before, c.name),
    clashName: (c, taken) => {
      let n = 2;
      while (taken.has(withNumericSuffix(c.name, n))) n++;
      return withNumericSuffix(c.name, n);
    },
  });
}

export interface ThreePassRules<C extends NameCandidate> {
  /** Names nobody may take. */
  taken?: Iterable<string>;
  previous?: PreviousNames;
  /** Whether the candidate keeps its earlier name (`taken` holds what this run handed out so far). */
  keepsPrevious: (candidate: C, before: string, taken: ReadonlySet<string>) => boolean;
  /** A free name for a candidate whose plain name is taken. */
  clashName: (candidate: C, taken: ReadonlySet<string>) => string;
}

/**
 * The one assignment order every naming rule shares: earlier names kept first, then plain names in
 * candidate order, then clash names; the result in candidate order, since callers iterate it.
 */
export function assignInThreePasses<C extends NameCandidate>(candidates: readonly C[], rules: ThreePassRules<C>): Map<string, string> {
  const taken = new Set(rules.taken ?? []);
  const previous = toMap(rules.previous);
  const assigned = new Map<string, string>();
  const give = (c: C, name: string) => {
    assigned.set(c.sourceId, name);
    taken.add(name);
  };

  for (const c of candidates) {
    if (assigned.has(c.sourceId)) throw new Error(`duplicate candidate sourceId ${c.sourceId}`);
    const before = previous.get(c.sourceId);
    if (before !== undefined && rules.keepsPrevious(c, before, taken)) give(c, before);
  }
  const clashing: C[] = [];
  for (const c of candidates) {
    if (assigned.has(c.sourceId)) continue;
    if (taken.has(c.name)) clashing.push(c);
    else give(c, c.name);
  }
  for (const c of clashing) give(c, rules.clashName(c, taken));
  return new Map(candidates.map((c) => [c.sourceId, assigned.get(c.sourceId)!]));
}
