import { createHash } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import type { ColumnSpec } from "./types";

/** Anything that runs a query: a pool or a client inside a transaction. */
export type Queryable = Pick<Pool | PoolClient, "query">;

export type DatasetKind = "resource" | "deviations" | "submission" | "grid";

/** A live (not retired) dataset of an organization, as the schema service maintains it. */
export interface RegistryEntry {
  key: string;
  kind: DatasetKind;
  /** Resource kind, `deviations`, or the form id (+ grid path) of a form dataset. */
  sourceRef: string;
  displayName?: string;
  parentKey?: string;
  /** The dataset's own columns in CSV order, without `_cursor`. */
  columns: ColumnSpec[];
  /** Hash of the ordered (key, dataType) list: the row shape cursors are bound to. */
  shapeFingerprint: string;
  /** Increments whenever the row shape changes (or a form dataset is rebuilt). */
  generation: number;
  /** `failed`: listed, but exports answer 503 DATASET_NOT_EXPORTABLE. */
  state: "ready" | "failed";
  /** Materialized table of a form dataset. */
  tableName?: string;
  error?: string;
  /**
   * The dataset's own change counter: `dataset_changes.version` of the row whose `dataset` is this
   * key (bumped by triggers for fixed datasets, by the form-dataset materializer for form datasets).
   * A decimal string (bigint); "0" when nothing was ever counted.
   */
  changeCounter: string;
}

interface RegistryRow {
  key: string;
  kind: DatasetKind;
  source_ref: string;
  display_name: string | null;
  parent_key: string | null;
  columns: ColumnSpec[];
  shape_fingerprint: string;
  generation: number;
  state: "ready" | "failed";
  table_name: string | null;
  error: string | null;
  change_counter: string;
}

const SELECT_ENTRIES = `
  SELECT r.key, r.kind, r.source_ref, r.display_name, r.parent_key, r.columns, r.shape_fingerprint,
         r.generation, r.state, r.table_name, r.error, COALESCE(c.version, 0)::text AS change_counter
    FROM dataset_registry r
    LEFT JOIN dataset_changes c ON c.organization_id = r.organization_id AND c.dataset = r.key
   WHERE r.organization_id = $1 AND r.state <> 'retired'`;

function toEntry(row: RegistryRow): RegistryEntry {
  const entry: RegistryEntry = {
    key: row.key,
    kind: row.kind,
    sourceRef: row.source_ref,
    columns: row.columns,
    shapeFingerprint: row.shape_fingerprint,
    generation: row.generation,
    state: row.state,
    changeCounter: row.change_counter,
  };
  if (row.display_name !== null) entry.displayName = row.display_name;
  if (row.parent_key !== null) entry.parentKey = row.parent_key;
  if (row.table_name !== null) entry.tableName = row.table_name;
  if (row.error !== null) entry.error = row.error;
  return entry;
}

/** Every non-retired dataset of the organization, in no particular order. */
export async function loadRegistry(db: Queryable, organizationId: string): Promise<RegistryEntry[]> {
  const { rows } = await db.query<RegistryRow>(SELECT_ENTRIES, [organizationId]);
  return rows.map(toEntry);
}

/** One non-retired dataset, or undefined (unknown, retired, or another organization's key). */
export async function loadRegistryEntry(db: Queryable, organizationId: string, key: string): Promise<RegistryEntry | undefined> {
  const { rows } = await db.query<RegistryRow>(`${SELECT_ENTRIES} AND r.key = $2`, [organizationId, key]);
  return rows[0] ? toEntry(rows[0]) : undefined;
}

/**
 * Read-your-writes for the registry: when the organization has a pending registry_sync_queue row
 * (a custom attribute changed a moment ago) or no registry rows at all (first use), runs `sync`
 * (the schema service's SyncDatasets) before the caller reads. Errors of `sync` propagate: serving a
 * listing or export with a stale shape would be worse than a retryable 503.
 */
export async function ensureRegistryCurrent(
  db: Queryable,
  organizationId: string,
  sync: (organizationId: string) => Promise<void>,
): Promise<void> {
  const { rows } = await db.query<{ pending: boolean; empty: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM registry_sync_queue WHERE organization_id = $1) AS pending,
            NOT EXISTS (SELECT 1 FROM dataset_registry WHERE organization_id = $1) AS empty`,
    [organizationId],
  );
  if (rows[0].pending || rows[0].empty) await sync(organizationId);
}

/**
 * The row-shape fingerprint of a column list: SHA-256 over the ordered (key, dataType) pairs.
 * Labels and sources are left out on purpose: relabelling does not change the shape.
 */
export function shapeFingerprint(columns: ReadonlyArray<Pick<ColumnSpec, "key" | "dataType">>): string {
  return createHash("sha256")
    .update(JSON.stringify(columns.map((c) => [c.key, c.dataType])))
    .digest("hex");
}
