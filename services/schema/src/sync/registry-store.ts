import type { PoolClient } from "pg";
import type { ColumnSpec, DatasetKind } from "@exportsvc/datasets";
import { shapeFingerprint } from "@exportsvc/datasets";

/** What a syncer wants a registry row to hold. generation is derived; timestamps are the store's. */
export interface DesiredRegistryEntry {
  key: string;
  kind: DatasetKind;
  sourceRef: string;
  displayName?: string;
  parentKey?: string;
  columns: ColumnSpec[];
  nameAssignments: Record<string, string>;
  tableName?: string;
}

export interface StoredRegistryEntry {
  key: string;
  kind: string;
  source_ref: string;
  display_name: string | null;
  parent_key: string | null;
  columns: unknown;
  name_assignments: Record<string, string>;
  shape_fingerprint: string;
  generation: number;
  state: string;
  table_name: string | null;
  error: string | null;
}

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

/** Registry rows of the organization with the given keys, locked for the rest of the transaction. */
export async function lockRegistryEntries(client: PoolClient, organizationId: string, keys: string[]): Promise<Map<string, StoredRegistryEntry>> {
  const { rows } = await client.query<StoredRegistryEntry>(
    `SELECT key, kind, source_ref, display_name, parent_key, columns, name_assignments, shape_fingerprint,
            generation, state, table_name, error
       FROM dataset_registry WHERE organization_id = $1 AND key = ANY($2::text[]) FOR UPDATE`,
    [organizationId, keys],
  );
  return new Map(rows.map((r) => [r.key, r]));
}

function isUnchanged(stored: StoredRegistryEntry, desired: DesiredRegistryEntry, fingerprint: string): boolean {
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
  stored: StoredRegistryEntry | undefined,
): Promise<boolean> {
  const fingerprint = shapeFingerprint(desired.columns);
  if (stored && isUnchanged(stored, desired, fingerprint)) return false;
  const generation = !stored ? 1 : stored.shape_fingerprint === fingerprint ? stored.generation : stored.generation + 1;
  await client.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, parent_key, columns,
                                   name_assignments, shape_fingerprint, generation, state, table_name, error)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, 'ready', $11, NULL)
     ON CONFLICT (organization_id, key) DO UPDATE SET
       kind = excluded.kind, source_ref = excluded.source_ref, display_name = excluded.display_name,
       parent_key = excluded.parent_key, columns = excluded.columns, name_assignments = excluded.name_assignments,
       shape_fingerprint = excluded.shape_fingerprint, generation = excluded.generation, state = 'ready',
       table_name = excluded.table_name, error = NULL, updated_at = clock_timestamp()`,
    [
      organizationId,
      desired.key,
      desired.kind,
      desired.sourceRef,
      desired.displayName ?? null,
      desired.parentKey ?? null,
      JSON.stringify(desired.columns),
      JSON.stringify(desired.nameAssignments),
      fingerprint,
      generation,
      desired.tableName ?? null,
    ],
  );
  return true;
}
