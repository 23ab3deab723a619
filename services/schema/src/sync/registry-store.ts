import type { PoolClient } from "pg";
import type { RegistryRowWrite, StoredRegistryRow } from "@exportsvc/datasets";
import { shapeFingerprint, upsertRegistryRows } from "@exportsvc/datasets";

/** What a syncer wants a registry row to hold. generation and state are derived; timestamps are the store's. */
export type DesiredRegistryEntry = Omit<RegistryRowWrite, "generation" | "state" | "error" | "tableName"> & { tableName?: string };

/** JSON with object keys sorted: jsonb does not keep key order, so plain stringify cannot compare. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function isUnchanged(stored: StoredRegistryRow, desired: DesiredRegistryEntry, fingerprint: string): boolean {
  return (
    stored.state === "ready" &&
    stored.error === null &&
    stored.kind === desired.kind &&
    stored.source_ref === desired.sourceRef &&
    stored.display_name === (desired.displayName ?? null) &&
    stored.parent_key === (desired.parentKey ?? null) &&
    stored.table_name === (desired.tableName ?? null) &&
    stored.shape_fingerprint === fingerprint &&
    canonicalJson(stored.columns) === canonicalJson(desired.columns) &&
    canonicalJson(stored.name_assignments) === canonicalJson(desired.nameAssignments)
  );
}

/**
 * Writes the registry rows whose content differs, all in one statement, so an idle sync moves no
 * timestamps, tokens or ETags and a sync of a fresh organization costs one round trip, not one per
 * row. generation starts at 1 and increments only when the row shape changes. `stored` holds the
 * current rows by key. Returns how many rows were written.
 */
export async function writeRegistryEntries(
  client: PoolClient,
  organizationId: string,
  desired: readonly DesiredRegistryEntry[],
  stored: ReadonlyMap<string, StoredRegistryRow>,
): Promise<number> {
  const writes: RegistryRowWrite[] = [];
  for (const entry of desired) {
    const current = stored.get(entry.key);
    const fingerprint = shapeFingerprint(entry.columns);
    if (current && isUnchanged(current, entry, fingerprint)) continue;
    const generation = !current ? 1 : current.shape_fingerprint === fingerprint ? current.generation : current.generation + 1;
    writes.push({ ...entry, generation, state: "ready", tableName: entry.tableName ?? null, error: null });
  }
  await upsertRegistryRows(client, organizationId, writes);
  return writes.length;
}
