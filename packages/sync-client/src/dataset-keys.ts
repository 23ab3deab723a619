/**
 * `--datasets` keys that the listing does not have: most often a typo, which would otherwise make
 * a run that silently syncs (or verifies) nothing and exits 0.
 */

/** "not in the listing", with the closest listed key when one is near enough to be a typo. */
export function notListedMessage(key: string, listed: Iterable<string>): string {
  const suggestion = closest(key, listed);
  return `not in the listing${suggestion ? ` (did you mean ${suggestion}?)` : ""}`;
}

/** The listed key nearest `key` by edit distance, if within a third of its length (at least 2). */
function closest(key: string, listed: Iterable<string>): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const candidate of listed) {
    const distance = editDistance(key, candidate);
    if (!best || distance < best.distance) best = { key: candidate, distance };
  }
  return best && best.distance <= Math.max(2, Math.floor(key.length / 3)) ? best.key : undefined;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row of the table at a time. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}
