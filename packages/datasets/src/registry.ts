import { createHash } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { preparedStatement } from "@exportsvc/common";
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
  /**
   * The organization's rewrite counter (`dataset_rewrites.version`, migration 046): bumped when a
   * record other rows display by name is renamed or deleted. A decimal string; "0" when never bumped.
   */
  rewriteCounter: string;
  /**
   * The dataset's own rewrite counter (`dataset_rewrite_counters.version`, migration 105): bumped when
   * a relation or a borrowed column its rows show changed in another record (a supplier's products
   * for the products dataset; a submission's status for the deviations). "0" when never bumped.
   */
  datasetRewriteCounter: string;
  /**
   * `dataset_changes.settles_at` in µs since the epoch (migration 040): every counted row is stamped
   * at or before it. Undefined when nothing was ever counted.
   */
  settlesAtMicros?: string;
  /**
   * A form dataset whose table stores each row's signed `_cursor` (column `signed_cursor`): the
   * signature of the key and binding that signed them (migration 100). Undefined: none are stored,
   * or the entry comes from loadRegistry (the listing has no use for it; only single entries read it).
   */
  storedCursorSignature?: string;
}

/** What the readers select: the stored row (less what only writers need) plus the change counter. */
type RegistryReadRow = Omit<StoredRegistryRow, "name_assignments" | "state"> & {
  state: "ready" | "failed";
  change_counter: string;
  rewrite_counter: string;
  dataset_rewrite_counter: string;
  settles_at_micros: string | null;
  stored_cursor_signature: string | null;
};

/** The readers' statement; only a page (one entry) needs the table's stored-cursor signature. */
const selectEntries = (storedCursorSignature: boolean) => `
  SELECT r.key, r.kind, r.source_ref, r.display_name, r.parent_key, r.columns, r.shape_fingerprint,
         r.generation, r.state, r.table_name, r.error, COALESCE(c.version, 0)::text AS change_counter,
         COALESCE(w.version, 0)::text AS rewrite_counter, COALESCE(dw.version, 0)::text AS dataset_rewrite_counter,
         (extract(epoch FROM c.settles_at) * 1000000)::bigint::text AS settles_at_micros,
         ${storedCursorSignature ? "t.cursor_signature" : "NULL::text"} AS stored_cursor_signature
    FROM dataset_registry r
    LEFT JOIN dataset_changes c ON c.organization_id = r.organization_id AND c.dataset = r.key
    LEFT JOIN dataset_rewrites w ON w.organization_id = r.organization_id
    LEFT JOIN dataset_rewrite_counters dw ON dw.organization_id = r.organization_id AND dw.dataset = r.key${
      storedCursorSignature ? "\n    LEFT JOIN form_ds.dataset_tables t ON t.organization_id = r.organization_id AND t.table_name = r.table_name" : ""
    }
   WHERE r.organization_id = $1 AND r.state <> 'retired'`;
const SELECT_ENTRIES = selectEntries(false);

function toEntry(row: RegistryReadRow): RegistryEntry {
  const entry: RegistryEntry = {
    key: row.key,
    kind: row.kind,
    sourceRef: row.source_ref,
    columns: row.columns,
    shapeFingerprint: row.shape_fingerprint,
    generation: row.generation,
    state: row.state,
    changeCounter: row.change_counter,
    rewriteCounter: row.rewrite_counter,
    datasetRewriteCounter: row.dataset_rewrite_counter,
  };
  if (row.display_name !== null) entry.displayName = row.display_name;
  if (row.parent_key !== null) entry.parentKey = row.parent_key;
  if (row.table_name !== null) entry.tableName = row.table_name;
  if (row.error !== null) entry.error = row.error;
  if (row.settles_at_micros !== null) entry.settlesAtMicros = row.settles_at_micros;
  if (row.stored_cursor_signature) entry.storedCursorSignature = row.stored_cursor_signature;
  return entry;
}

/** Every non-retired dataset of the organization, in no particular order. */
export async function loadRegistry(db: Queryable, organizationId: string): Promise<RegistryEntry[]> {
  const { rows } = await db.query<RegistryReadRow>(SELECT_ENTRIES, [organizationId]);
  return rows.map(toEntry);
}

/** One non-retired dataset, or undefined (unknown, retired, or another organization's key). */
export async function loadRegistryEntry(db: Queryable, organizationId: string, key: string): Promise<RegistryEntry | undefined> {
  const { rows } = await db.query<RegistryReadRow>({ ...SELECT_ENTRY, values: [organizationId, key] });
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
  const { rows } = await db.query<{ sync_needed: boolean }>(`SELECT ${REGISTRY_SYNC_NEEDED_SQL} AS sync_needed`, [organizationId]);
  if (rows[0].sync_needed) await sync(organizationId);
}

/** The sync check and one entry in one statement: `registry_pending` / `registry_empty` as in ensureRegistryCurrent. */
const SELECT_ENTRY = preparedStatement("registry-entry", `${selectEntries(true)} AND r.key = $2`);
// Every page runs it: prepared (planning it cost three times its execution).
const SELECT_ENTRY_IF_CURRENT = preparedStatement(
  "registry-entry-if-current",
  `
  SELECT EXISTS (SELECT 1 FROM registry_sync_queue WHERE organization_id = $1) AS registry_pending,
         NOT EXISTS (SELECT 1 FROM dataset_registry WHERE organization_id = $1) AS registry_empty, e.*
    FROM (SELECT 1) one LEFT JOIN LATERAL (${SELECT_ENTRY.text}) e ON true`,
);

/**
 * ensureRegistryCurrent then loadRegistryEntry, in one round trip when the registry is current (the
 * export path runs it on every page): the entry is read again only after a sync.
 */
export async function loadCurrentRegistryEntry(
  db: Queryable,
  organizationId: string,
  key: string,
  sync: (organizationId: string) => Promise<void>,
): Promise<RegistryEntry | undefined> {
  const { rows } = await db.query<RegistryReadRow & { registry_pending: boolean; registry_empty: boolean }>({ ...SELECT_ENTRY_IF_CURRENT, values: [organizationId, key] });
  if (rows[0].registry_pending || rows[0].registry_empty) {
    await sync(organizationId);
    return loadRegistryEntry(db, organizationId, key);
  }
  return rows[0].key === null ? undefined : toEntry(rows[0]);
}

/**
 * SQL boolean, organization id `$1`: the registry must be synced before it is read (a pending
 * registry_sync_queue row, or no registry rows at all). For statements that decide more at once.
 */
export const REGISTRY_SYNC_NEEDED_SQL = `(EXISTS (SELECT 1 FROM registry_sync_queue WHERE organization_id = $1)
            OR NOT EXISTS (SELECT 1 FROM dataset_registry WHERE organization_id = $1))`;

/**
 * The column fingerprint of a column list (`dataset_registry.shape_fingerprint`): SHA-256 over the
 * ordered (key, dataType) pairs. Labels and sources are left out on purpose: relabelling does not
 * change it. It moves the dataset's generation and changeToken; cursors are bound to rowShape instead.
 */
export function shapeFingerprint(columns: ReadonlyArray<Pick<ColumnSpec, "key" | "dataType">>): string {
  return createHash("sha256")
    .update(JSON.stringify(columns.map((c) => [c.key, c.dataType])))
    .digest("hex");
}

/** A registry row as stored (any state): the one declaration of dataset_registry's row type. */
export interface StoredRegistryRow {
  key: string;
  kind: DatasetKind;
  source_ref: string;
  display_name: string | null;
  parent_key: string | null;
  columns: ColumnSpec[];
  name_assignments: Record<string, string>;
  shape_fingerprint: string;
  generation: number;
  state: "ready" | "failed" | "retired";
  table_name: string | null;
  error: string | null;
}

const STORED_COLUMNS = `key, kind, source_ref, display_name, parent_key, columns, name_assignments, shape_fingerprint,
            generation, state, table_name, error`;

/** Registry rows of the organization with the given keys (any state), locked for the rest of the transaction. */
export async function lockRegistryRowsByKey(db: Queryable, organizationId: string, keys: string[]): Promise<Map<string, StoredRegistryRow>> {
  const { rows } = await db.query<StoredRegistryRow>(
    `SELECT ${STORED_COLUMNS} FROM dataset_registry WHERE organization_id = $1 AND key = ANY($2::text[]) FOR UPDATE`,
    [organizationId, keys],
  );
  return new Map(rows.map((r) => [r.key, r]));
}

/** Registry rows (any state) of one form: its submission dataset and its grids, locked for the rest of the transaction. */
export async function lockFormRegistryRows(db: Queryable, organizationId: string, formId: string): Promise<StoredRegistryRow[]> {
  const { rows } = await db.query<StoredRegistryRow>(
    `SELECT ${STORED_COLUMNS} FROM dataset_registry
      WHERE organization_id = $1 AND kind IN ('submission', 'grid') AND (source_ref = $2 OR source_ref LIKE $2 || '/%')
      FOR UPDATE`,
    [organizationId, formId],
  );
  return rows;
}

/**
 * What a writer puts in a registry row: the entry's own fields (the shape fingerprint is derived from
 * the columns here, the counters are the triggers'), plus the name assignments. Nullable table and
 * error, so an update can clear them.
 */
export type RegistryRowWrite = Pick<RegistryEntry, "key" | "kind" | "sourceRef" | "displayName" | "parentKey" | "columns" | "generation" | "state"> & {
  nameAssignments: Record<string, string>;
  tableName?: string | null;
  error?: string | null;
};

export class RegistryKeyConflictError extends Error {
  constructor(readonly key: string) {
    super(`dataset key '${key}' belongs to another dataset`);
    this.name = "RegistryKeyConflictError";
  }
}

/**
 * The one insert-or-update of registry rows, all of one organization in one statement (a sync of a
 * fresh organization writes twelve: one round trip instead of twelve, which is most of a sync's time
 * when the service shares a loaded machine with a fleet build). Never takes over another dataset's
 * row: a key is bound to its (kind, source) for ever (a rename retires the key; the retired row keeps
 * its name), so a conflict with a different source is a bug to surface, not a row to overwrite.
 * Keys must be distinct within one call.
 */
export async function upsertRegistryRows(db: Queryable, organizationId: string, rows: readonly RegistryRowWrite[]): Promise<void> {
  if (rows.length === 0) return;
  const written = await db.query<{ key: string }>(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, parent_key, columns, name_assignments,
                                   shape_fingerprint, generation, state, table_name, error)
     SELECT $1, r.key, r.kind, r.source_ref, r.display_name, r.parent_key, r.columns, r.name_assignments,
            r.shape_fingerprint, r.generation, r.state, r.table_name, r.error
       FROM jsonb_to_recordset($2::jsonb) AS r(key text, kind text, source_ref text, display_name text, parent_key text,
            columns jsonb, name_assignments jsonb, shape_fingerprint text, generation integer, state text, table_name text, error text, n integer)
      ORDER BY r.n
     ON CONFLICT (organization_id, key) DO UPDATE SET
       kind = excluded.kind, source_ref = excluded.source_ref, display_name = excluded.display_name, parent_key = excluded.parent_key,
       columns = excluded.columns, name_assignments = excluded.name_assignments, shape_fingerprint = excluded.shape_fingerprint,
       generation = excluded.generation, state = excluded.state, table_name = excluded.table_name, error = excluded.error,
       updated_at = clock_timestamp()
     WHERE dataset_registry.source_ref = excluded.source_ref AND dataset_registry.kind = excluded.kind
     RETURNING key`,
    [
      organizationId,
      JSON.stringify(
        rows.map((row, n) => ({
          n,
          key: row.key,
          kind: row.kind,
          source_ref: row.sourceRef,
          display_name: row.displayName ?? null,
          parent_key: row.parentKey ?? null,
          columns: row.columns,
          name_assignments: row.nameAssignments,
          shape_fingerprint: shapeFingerprint(row.columns),
          generation: row.generation,
          state: row.state,
          table_name: row.tableName ?? null,
          error: row.error ?? null,
        })),
      ),
    ],
  );
  const done = new Set(written.rows.map((r) => r.key));
  const refused = rows.find((row) => !done.has(row.key));
  if (refused) throw new RegistryKeyConflictError(refused.key);
}

/** Version of the row-shape definition below; bump it when the paging order behind a position changes. */
export const ROW_SHAPE_VERSION = 1;

/** The columns a paging position is made of, in order (docs/cursor.md, "Row shape"). */
export const positionColumns = (kind: DatasetKind): string[] =>
  kind === "grid" ? ["last_modified", "id", "row_index"] : ["last_modified", "id"];

/**
 * The row shape a cursor is bound to: what a paging position means, and nothing about the columns.
 * It is the dataset's kind, its position columns and its source: the resource kind, `deviations`, or
 * the form id followed by the grid path (outermost grid first), which fixes a grid's nesting level and
 * its ancestors, and so what its `row_index` counts. A column added, removed, retyped or relabelled
 * leaves it alone, so held cursors survive a publish. A key never changes its (kind, source)
 * (upsertRegistryRows refuses it; a moved or renamed grid gets a new key and the old one retires), so
 * a dataset key keeps one row shape for its whole life. Prefixed so it never equals a column fingerprint.
 */
export function rowShape(dataset: Pick<RegistryEntry, "kind" | "sourceRef">): string {
  const material = JSON.stringify([ROW_SHAPE_VERSION, dataset.kind, positionColumns(dataset.kind), dataset.sourceRef]);
  return `row:${createHash("sha256").update(material).digest("hex")}`;
}

/**
 * Every row shape fingerprint an organization's dataset keys have had: the registry rows (current and
 * retired) and dataset_shape_history, for checking which binding a cursor was issued under.
 */
export async function loadKnownShapes(
  db: Queryable,
  organizationId: string,
): Promise<{
  rows: Array<{ key: string; kind: DatasetKind; source_ref: string; shape_fingerprint: string }>;
  history: Array<{ dataset_key: string; shape_fingerprint: string }>;
}> {
  const { rows } = await db.query<{ key: string; kind: DatasetKind; source_ref: string; shape_fingerprint: string }>(
    `SELECT key, kind, source_ref, shape_fingerprint FROM dataset_registry WHERE organization_id = $1`,
    [organizationId],
  );
  const history = await db.query<{ dataset_key: string; shape_fingerprint: string }>(
    `SELECT dataset_key, shape_fingerprint FROM dataset_shape_history WHERE organization_id = $1`,
    [organizationId],
  );
  return { rows, history: history.rows };
}
