import type { PoolClient } from "pg";

/**
 * Change-detecting upserts: a record is written only when it differs from what is stored, so
 * re-applying a document moves neither `last_modified` nor the dataset change counters (the
 * statement triggers only count rows a statement really touched).
 */
export type SqlType = "text" | "uuid" | "numeric" | "integer" | "boolean" | "date" | "timestamptz" | "jsonb";

export interface ColumnDef {
  column: string;
  type: SqlType;
  /**
   * plain: part of the record's state. stamp: `last_modified` — compared only when the document
   * gives it, else clock_timestamp() on every write. keep: compared only when given, set at insert
   * (clock_timestamp() by default) and kept on update unless given (e.g. deviations.created_at).
   * note: part of the record's state like plain, but a write that changes only note columns keeps
   * the stored `last_modified` (docs/contract.md §9: the standalone deviation comment must not move it).
   */
  mode?: "plain" | "stamp" | "keep" | "note";
}

/** An unordered set stored in a join table owned by the record (supplier_products, ...). */
export interface SetRelation {
  kind: "set";
  /** Name of the jsonb array property of each row object. */
  property: string;
  table: string;
  ownerColumn: string;
  valueColumn: string;
  valueType: "uuid" | "text";
}

/** An ordered list of child rows replaced whole when it changes (steps, document versions). */
export interface ChildList {
  kind: "list";
  property: string;
  /** jsonb array describing the stored children of record `d.id` (in $1's organization). */
  storedJson: string;
  /** Compare as a set (order-insensitive) instead of as a list. */
  unordered?: boolean;
  table: string;
  ownerColumn: string;
  /** Inserts the children of the given rows (row objects as passed to upsertRows). */
  insert(client: PoolClient, organizationId: string, rows: Row[]): Promise<void>;
}

export interface TableDef {
  table: string;
  columns: ColumnDef[];
  relations?: (SetRelation | ChildList)[];
}

export type Row = Record<string, unknown> & { id: string };

const q = (ident: string) => `"${ident.replace(/"/g, '""')}"`;
const BATCH = 2000;

export interface UpsertResult {
  inserted: number;
  updated: number;
  unchanged: number;
}

/** Upserts rows of one table for one organization; rows hold column values keyed by column name. */
export async function upsertRows(client: PoolClient, organizationId: string, def: TableDef, rows: Row[]): Promise<UpsertResult> {
  const total: UpsertResult = { inserted: 0, updated: 0, unchanged: 0 };
  for (let i = 0; i < rows.length; i += BATCH) {
    const r = await upsertBatch(client, organizationId, def, rows.slice(i, i + BATCH));
    total.inserted += r.inserted;
    total.updated += r.updated;
    total.unchanged += r.unchanged;
  }
  return total;
}

function recordsetColumns(def: TableDef): string {
  const cols = [`id uuid`, ...def.columns.map((c) => `${q(c.column)} ${c.type}`)];
  for (const rel of def.relations ?? []) cols.push(`${q(rel.property)} jsonb`);
  return cols.join(", ");
}

async function upsertBatch(client: PoolClient, organizationId: string, def: TableDef, rows: Row[]): Promise<UpsertResult> {
  const t = q(def.table);
  const plain = def.columns.filter((c) => (c.mode ?? "plain") === "plain");
  const notes = def.columns.filter((c) => c.mode === "note");
  const optional = def.columns.filter((c) => c.mode === "stamp" || c.mode === "keep");
  const columnsDiffer = (cols: ColumnDef[]) =>
    `(${cols.map((c) => `t.${q(c.column)}`).join(", ")}, NULL) IS DISTINCT FROM (${cols.map((c) => `d.${q(c.column)}`).join(", ")}, NULL)`;
  // Differences that restamp `last_modified`: the columns', then each relation's (relation_i: a
  // relation is rewritten only when it differs, so the triggers on the child tables see real changes
  // only; migration 105 counts them as rewrites of the rows that show them). Note columns are
  // compared for detection only. Each is computed once per row in the inner query (OFFSET 0 keeps
  // PostgreSQL from inlining the relations' subqueries into every place that reads them).
  const columnDiffers: string[] = [];
  if (plain.length > 0) columnDiffers.push(columnsDiffer(plain));
  for (const c of optional) columnDiffers.push(`(d.${q(c.column)} IS NOT NULL AND d.${q(c.column)} IS DISTINCT FROM t.${q(c.column)})`);
  const relations = def.relations ?? [];
  const relationFlags = relations.map((_, i) => `relation_${i}`);
  const restamp = ["columns_differ", ...relationFlags].join(" OR ");
  const relationColumns = relations.map((rel, i) => `, coalesce(${relationDiffers(rel)}, false) AS relation_${i}`).join("");
  const detect = await client.query<{ id: string; exists: boolean; restamp: boolean } & Record<`relation_${number}`, boolean>>(
    `SELECT id, exists, ${restamp} AS restamp${relationFlags.map((f) => `, ${f}`).join("")}
       FROM (SELECT d.id::text AS id, t.id IS NOT NULL AS exists,
                    coalesce(${columnDiffers.length > 0 ? columnDiffers.join(" OR ") : "false"}, false) AS columns_differ,
                    coalesce(${notes.length > 0 ? columnsDiffer(notes) : "false"}, false) AS notes_differ${relationColumns}
               FROM jsonb_to_recordset($2::jsonb) AS d(${recordsetColumns(def)})
               LEFT JOIN ${t} t ON t.organization_id = $1 AND t.id = d.id
             OFFSET 0) x
      WHERE NOT exists OR ${restamp} OR notes_differ`,
    [organizationId, JSON.stringify(rows)],
  );
  const toInsert = new Set(detect.rows.filter((r) => !r.exists).map((r) => r.id));
  const toUpdate = new Set(detect.rows.filter((r) => r.exists).map((r) => r.id));
  // Updated rows whose only changes are note columns keep their stored `last_modified`.
  const keepStamp = detect.rows.filter((r) => r.exists && !r.restamp).map((r) => r.id);
  const insertRows = rows.filter((r) => toInsert.has(r.id));
  const updateRows = rows.filter((r) => toUpdate.has(r.id));

  const isState = (c: ColumnDef) => (c.mode ?? "plain") === "plain" || c.mode === "note";
  const valueOf = (c: ColumnDef) => (isState(c) ? `d.${q(c.column)}` : `coalesce(d.${q(c.column)}, clock_timestamp())`);
  if (insertRows.length > 0) {
    await client.query(
      `INSERT INTO ${t} (organization_id, id, ${def.columns.map((c) => q(c.column)).join(", ")})
       SELECT $1, d.id, ${def.columns.map(valueOf).join(", ")}
         FROM jsonb_to_recordset($2::jsonb) AS d(${recordsetColumns(def)})`,
      [organizationId, JSON.stringify(insertRows)],
    );
  }
  if (updateRows.length > 0) {
    // $3 (ids keeping their stamp) is only sent when referenced: PostgreSQL rejects untyped unused parameters.
    const hasStamp = def.columns.some((c) => c.mode === "stamp");
    const sets = def.columns.map((c) => {
      const col = q(c.column);
      if (c.mode === "keep") return `${col} = coalesce(d.${col}, t.${col})`;
      if (c.mode === "stamp") return `${col} = coalesce(d.${col}, CASE WHEN d.id = ANY($3::uuid[]) THEN t.${col} ELSE clock_timestamp() END)`;
      return `${col} = ${valueOf(c)}`;
    });
    await client.query(
      `UPDATE ${t} AS t SET ${sets.join(", ")}
         FROM jsonb_to_recordset($2::jsonb) AS d(${recordsetColumns(def)})
        WHERE t.organization_id = $1 AND t.id = d.id`,
      hasStamp ? [organizationId, JSON.stringify(updateRows), keepStamp] : [organizationId, JSON.stringify(updateRows)],
    );
  }
  for (const [i, rel] of relations.entries()) {
    const changed = new Set(detect.rows.filter((r) => r[`relation_${i}`]).map((r) => r.id));
    if (changed.size > 0) await replaceRelation(client, organizationId, rel, rows.filter((r) => changed.has(r.id)));
  }
  return { inserted: insertRows.length, updated: updateRows.length, unchanged: rows.length - insertRows.length - updateRows.length };
}

/** SQL: the relation given for row `d` differs from the one stored for it (`$1`: the organization). */
function relationDiffers(rel: SetRelation | ChildList): string {
  const stored =
    rel.kind === "set"
      ? `coalesce((SELECT jsonb_agg(r.${q(rel.valueColumn)}) FROM ${q(rel.table)} r WHERE r.organization_id = $1 AND r.${q(rel.ownerColumn)} = d.id), '[]'::jsonb)`
      : `coalesce(${rel.storedJson}, '[]'::jsonb)`;
  const p = `coalesce(d.${q(rel.property)}, '[]'::jsonb)`;
  return rel.kind === "set" || rel.unordered ? `NOT (${stored} @> ${p} AND ${p} @> ${stored})` : `${stored} IS DISTINCT FROM ${p}`;
}

/** Writes one relation of rows whose relation differs from the stored one. */
async function replaceRelation(client: PoolClient, organizationId: string, rel: SetRelation | ChildList, rows: Row[]): Promise<void> {
  const ids = rows.map((r) => r.id);
  if (rel.kind === "set") {
    // Only the difference is written: the far side of a link table (products.suppliers) has no
    // last_modified of its own to move, so its dataset's rewrite counter (migration 105) counts
    // every pair that came or went, and restating an unchanged set must not look like a change.
    const pairs = JSON.stringify(rows.flatMap((r) => ((r[rel.property] as unknown[] | undefined) ?? []).map((v) => [r.id, v])));
    const owner = q(rel.ownerColumn);
    const value = q(rel.valueColumn);
    await client.query(
      `DELETE FROM ${q(rel.table)} t WHERE t.organization_id = $1 AND t.${owner} = ANY($2::uuid[])
          AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements($3::jsonb) AS p WHERE (p->>0)::uuid = t.${owner} AND (p->>1)::${rel.valueType} = t.${value})`,
      [organizationId, ids, pairs],
    );
    await client.query(
      `INSERT INTO ${q(rel.table)} (organization_id, ${owner}, ${value})
       SELECT $1, (p->>0)::uuid, (p->>1)::${rel.valueType} FROM jsonb_array_elements($2::jsonb) AS p
       ON CONFLICT DO NOTHING`,
      [organizationId, pairs],
    );
  } else {
    await client.query(`DELETE FROM ${q(rel.table)} WHERE organization_id = $1 AND ${q(rel.ownerColumn)} = ANY($2::uuid[])`, [organizationId, ids]);
    await rel.insert(client, organizationId, rows);
  }
}

/** Hard-deletes records by id; returns how many existed. */
export async function deleteRows(client: PoolClient, organizationId: string, table: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const res = await client.query(`DELETE FROM ${q(table)} WHERE organization_id = $1 AND id = ANY($2::uuid[])`, [organizationId, ids]);
  return res.rowCount ?? 0;
}
