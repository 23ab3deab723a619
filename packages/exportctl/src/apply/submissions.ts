import type { PoolClient } from "pg";
import { ExportctlError } from "../errors";
import { ATTRIBUTE_KINDS, type ApplyDocument, type FieldInput } from "./schema";
import { TABLE_OF, type RefKind } from "./tables";
import type { Row } from "./upsert";

/** Verification instants keyed by top-level field key or id → keyed by field id. */
export function resolveVerifications(fields: FieldInput[], values: Record<string, string>, path: string, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, at] of Object.entries(values)) {
    const field = fields.find((f) => f.key === name) ?? fields.find((f) => f.id === name.toLowerCase());
    if (!field) problems.push(`${path}.${name}: the form has no field with key or id '${name}'`);
    else if (!field.requiresVerification) problems.push(`${path}.${name}: field '${field.key}' does not require verification`);
    else out[field.id] = at;
  }
  return out;
}

const SNAPSHOT_TABLE: Partial<Record<RefKind, string>> = Object.fromEntries(
  [...Object.keys(ATTRIBUTE_KINDS), "documents", "sites", "teams"].map((k) => [k, TABLE_OF[k as RefKind]]),
);

export interface PendingSnapshot {
  target: { id: string; record?: unknown };
  kind: RefKind;
  submissionId: string;
  locator: (string | number)[];
}

/**
 * A resourceSelect value given without `record` keeps the snapshot its submission already stores
 * for the same record (a snapshot is taken once, when the value is captured); otherwise it stores
 * the referenced record as it stands now.
 */
export async function fillSnapshots(client: PoolClient, org: string, snapshots: PendingSnapshot[]): Promise<void> {
  if (snapshots.length === 0) return;
  const storedValues = await client.query<{ id: string; values: unknown }>(
    `SELECT id::text AS id, "values" FROM submissions WHERE organization_id = $1 AND id = ANY($2::uuid[])`,
    [org, [...new Set(snapshots.map((s) => s.submissionId))]],
  );
  const valuesOf = new Map(storedValues.rows.map((r) => [r.id, r.values]));
  const pending: PendingSnapshot[] = [];
  for (const s of snapshots) {
    let at: unknown = valuesOf.get(s.submissionId);
    for (const step of s.locator) at = at !== null && typeof at === "object" ? (at as Record<string | number, unknown>)[step] : undefined;
    const kept = at as { id?: unknown; record?: unknown } | undefined;
    if (kept && kept.id === s.target.id && kept.record !== null && typeof kept.record === "object") s.target.record = kept.record;
    else pending.push(s);
  }
  const byKind = new Map<RefKind, Set<string>>();
  for (const s of pending) {
    if (!byKind.has(s.kind)) byKind.set(s.kind, new Set());
    byKind.get(s.kind)!.add(s.target.id);
  }
  const records = new Map<string, unknown>();
  for (const [kind, ids] of byKind) {
    const rows = await client.query<{ id: string; record: unknown }>(
      `SELECT t.id::text AS id, to_jsonb(t) - 'organization_id' - 'last_modified' - 'path' AS record
         FROM ${SNAPSHOT_TABLE[kind]} t WHERE t.organization_id = $1 AND t.id = ANY($2::uuid[])`,
      [org, [...ids]],
    );
    for (const r of rows.rows) records.set(`${kind}:${r.id}`, r.record);
  }
  // A record the same document deletes has no row to copy: the snapshot is then just its id.
  for (const s of pending) s.target.record = records.get(`${s.kind}:${s.target.id}`) ?? { id: s.target.id };
}

export async function submissionRows(
  client: PoolClient,
  org: string,
  submissions: { input: NonNullable<ApplyDocument["submissions"]>[number]; values: Record<string, unknown>; verifications: Record<string, string> }[],
): Promise<Row[]> {
  if (submissions.length === 0) return [];
  const stored = await client.query<{ id: string; record_id: string; form_version: number | null }>(
    "SELECT id::text AS id, record_id, form_version FROM submissions WHERE organization_id = $1 AND id = ANY($2::uuid[])",
    [org, submissions.map((s) => s.input.id)],
  );
  const existing = new Map(stored.rows.map((r) => [r.id, r]));
  const formIds = [...new Set(submissions.map((s) => s.input.formId))];
  const published = await client.query<{ form_id: string; version: number }>(
    `SELECT form_id::text, max(version) AS version FROM form_versions
      WHERE organization_id = $1 AND form_id = ANY($2::uuid[]) AND published_at IS NOT NULL GROUP BY form_id`,
    [org, formIds],
  );
  const latestPublished = new Map(published.rows.map((r) => [r.form_id, r.version]));

  // Explicit record ids advance the form's counter so generated ones never repeat them.
  const explicitMax = new Map<string, number>();
  const needing = new Map<string, number>();
  for (const { input } of submissions) {
    if (input.recordId) {
      const n = Number(/-(\d+)$/.exec(input.recordId)?.[1] ?? 0);
      explicitMax.set(input.formId, Math.max(explicitMax.get(input.formId) ?? 0, n));
    } else if (!existing.has(input.id)) {
      needing.set(input.formId, (needing.get(input.formId) ?? 0) + 1);
    }
  }
  for (const [formId, n] of explicitMax) {
    await client.query("UPDATE forms SET record_counter = $3 WHERE organization_id = $1 AND id = $2 AND record_counter < $3", [org, formId, n]);
  }
  const nextCode = new Map<string, { prefix: string; next: number }>();
  for (const [formId, count] of needing) {
    const r = await client.query<{ record_prefix: string; record_counter: number }>(
      "UPDATE forms SET record_counter = record_counter + $3 WHERE organization_id = $1 AND id = $2 RETURNING record_prefix, record_counter",
      [org, formId, count],
    );
    if (r.rowCount === 0) throw new ExportctlError("UNKNOWN_REFERENCE", `form ${formId} was deleted by this document; its new submissions cannot get record ids`);
    nextCode.set(formId, { prefix: r.rows[0].record_prefix, next: r.rows[0].record_counter - count + 1 });
  }

  return submissions.map(({ input, values, verifications }) => {
    const before = existing.get(input.id);
    let recordId = input.recordId ?? before?.record_id;
    if (!recordId) {
      const code = nextCode.get(input.formId)!;
      recordId = `${code.prefix}-${code.next++}`;
    }
    return {
      id: input.id,
      form_id: input.formId,
      form_version: input.formVersion ?? before?.form_version ?? latestPublished.get(input.formId) ?? null,
      record_id: recordId,
      site_id: input.siteId ?? null,
      status: input.status ?? "InProgress",
      is_archived: input.archived ?? false,
      started_at: input.startedAt ?? null,
      completed_at: input.completedAt ?? null,
      values,
      verifications,
      last_modified: input.lastModified ?? null,
      steps: (input.steps ?? []).map((s) => ({ id: s.id, name: s.name, kind: s.kind ?? "Recording", status: s.status ?? "Pending" })),
    };
  });
}
