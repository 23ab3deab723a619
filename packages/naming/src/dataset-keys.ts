import { HASH_LENGTH, MAX_NAME_LENGTH, hash8 } from "./normalize";
import { assignInThreePasses, isDerivedFrom, withNumericSuffix, type NameCandidate, type PreviousNames } from "./unique";

/**
 * A dataset to key: `sourceId` its stable identity (form id for a submission dataset, form id + grid
 * path for a grid), `name` its name from the naming rules (directName(form name), composedName([parentKey, grid label])).
 */
export interface DatasetKeyCandidate extends NameCandidate {
  /**
   * What separates equal names: the form id, and for a grid dataset also the keys of the grid and
   * the grids around it (joined by the caller, e.g. [formId, ...gridKeys].join("/")).
   */
  hashInput: string;
}

export interface AssignDatasetKeysOptions {
  /**
   * Keys owned by other datasets of the organization, including fixed datasets (`deviations`,
   * `resources_*`) and retired keys: never handed out again.
   */
  taken?: Iterable<string>;
  /** The current keys of these sources (sourceId -> key); kept while the name they came from holds. */
  previous?: PreviousNames;
}

/** `<name>_<hash8(hashInput)>`, the name truncated so the total stays within the cap. */
export function hashedDatasetKey(name: string, hashInput: string): string {
  return `${name.slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1)}_${hash8(hashInput)}`;
}

/** Whether `key` is the candidate's plain name, its hashed key, or that with a clash suffix. */
function isDerivedKey(key: string, candidate: DatasetKeyCandidate): boolean {
  return key === candidate.name || isDerivedFrom(key, hashedDatasetKey(candidate.name, candidate.hashInput));
}

/**
 * Dataset keys for equal dataset names (docs/contract.md §6): the plain name to the first
 * dataset generated with it, permanently (a previous key is kept while its name holds, and a key
 * stays taken after retirement); later ones get `_<hash8(hashInput)>`; should that collide too, a
 * numeric suffix `_2`, `_3`, ... follows. Every key is <= 63 characters of [a-z0-9_].
 */
export function assignDatasetKeys(candidates: readonly DatasetKeyCandidate[], options: AssignDatasetKeysOptions = {}): Map<string, string> {
  const kept = new Set<string>();
  return assignInThreePasses(candidates, {
    taken: options.taken,
    previous: options.previous,
    // A previous key may sit in `taken` too (callers often pass every registry key): it is this source's own.
    keepsPrevious: (c, before) => {
      if (!isDerivedKey(before, c) || kept.has(before)) return false;
      kept.add(before);
      return true;
    },
    clashName: (c, taken) => {
      const hashed = hashedDatasetKey(c.name, c.hashInput);
      let key = hashed;
      for (let n = 2; taken.has(key); n++) key = withNumericSuffix(hashed, n);
      return key;
    },
  });
}
