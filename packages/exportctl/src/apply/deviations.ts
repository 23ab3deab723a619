import type { PoolClient } from "pg";
import type { ApplyDocument } from "./schema";
import type { Row } from "./upsert";

/** Deviation rows; codes are kept, given, or the organization's next DEV-<n>. */
export async function deviationRows(client: PoolClient, org: string, doc: ApplyDocument): Promise<Row[]> {
  const deviations = doc.deviations ?? [];
  if (deviations.length === 0) return [];
  const stored = await client.query<{ id: string; code: string }>(
    "SELECT id::text AS id, code FROM deviations WHERE organization_id = $1 AND id = ANY($2::uuid[])",
    [org, deviations.map((d) => d.id)],
  );
  const codes = new Map(stored.rows.map((r) => [r.id, r.code]));
  const max = await client.query<{ n: number }>(
    "SELECT coalesce(max(substring(code FROM '^DEV-(\\d+)$')::bigint), 0)::int AS n FROM deviations WHERE organization_id = $1",
    [org],
  );
  let next = Math.max(max.rows[0].n, ...deviations.map((d) => (d.code ? Number(d.code.slice(4)) : 0))) + 1;
  return deviations.map((d) => ({
    id: d.id,
    code: d.code ?? codes.get(d.id) ?? `DEV-${next++}`,
    submission_id: d.submissionId,
    step_id: d.stepId ?? null,
    severity: d.severity,
    status: d.status ?? "Open",
    resolution_type: d.resolutionType ?? null,
    field_key: d.fieldKey ?? null,
    field_label: d.fieldLabel ?? null,
    display_value: d.displayValue ?? null,
    row_id: d.rowId ?? null,
    assigned_user_id: d.assignedUserId ?? null,
    assigned_team_id: d.assignedTeamId ?? null,
    supplier_id: d.supplierId ?? null,
    comment: d.comment ?? null,
    resolution_comment: d.resolutionComment ?? null,
    resolved_by_id: d.resolvedById ?? null,
    resolved_at: d.resolvedAt ?? null,
    signed_by_id: d.signedById ?? null,
    signed_at: d.signedAt ?? null,
    linked_record_id: d.linkedRecordId ?? null,
    linked_resolution_comment: d.linkedResolutionComment ?? null,
    created_at: d.createdAt ?? null,
    last_modified: d.lastModified ?? null,
  }));
}
