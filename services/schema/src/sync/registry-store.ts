import type { PoolClient } from "pg";
import type { RegistryRowWrite, StoredRegistryRow } from "@exportsvc/datasets";
import { shapeFingerprint, upsertRegistryRow } from "@exportsvc/datasets";

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
 * Writes a registry row only when something in it differs, so an idle sync moves no timestamps,
 * tokens or ETags. generation starts at 1 and increments only when the row shape changes.
 * Returns whether a write happened.
 */
export async function writeRegistryEntry(
  client: PoolClient,
  organizationId: string,
  desired: DesiredRegistryEntry,
  stored: StoredRegistryRow | undefined,
): Promise<boolean> {
  const fingerprint = shapeFingerprint(desired.columns);
  if (stored && isUnchanged(stored, desired, fingerprint)) return false;
  const generation = !stored ? 1 : stored.shape_fingerprint === fingerprint ? stored.generation : stored.generation + 1;
  await upsertRegistryRow(client, organizationId, { ...desired, generation, state: "ready", tableName: desired.tableName ?? null, error: null });
  return true;
}
