import type { PoolClient } from "pg";
import type { ApplyDocument, FieldInput, FormInput } from "./schema";
import type { UpsertResult } from "./upsert";

/** The current field tree of every form the document's submissions use (document first, else stored). */
export async function loadFormFields(client: PoolClient, doc: ApplyDocument): Promise<Map<string, FieldInput[]>> {
  const fields = new Map<string, FieldInput[]>((doc.forms ?? []).map((f) => [f.id, f.fields]));
  const wanted = [...new Set((doc.submissions ?? []).map((s) => s.formId).filter((id) => !fields.has(id)))];
  if (wanted.length > 0) {
    const stored = await client.query<{ form_id: string; fields: FieldInput[] }>(
      `SELECT DISTINCT ON (form_id) form_id::text, fields FROM form_versions
        WHERE organization_id = $1 AND form_id = ANY($2::uuid[]) ORDER BY form_id, version DESC`,
      [doc.organization, wanted],
    );
    for (const r of stored.rows) fields.set(r.form_id, r.fields);
  }
  return fields;
}

/** Forms: a publish of changed fields adds a published version; publish: false keeps a draft version. */
export async function applyForms(client: PoolClient, org: string, forms: FormInput[]): Promise<UpsertResult> {
  const result: UpsertResult = { inserted: 0, updated: 0, unchanged: 0 };
  for (const form of forms) {
    const fieldsJson = JSON.stringify(form.fields);
    const stored = await client.query<{ name: string; record_prefix: string; deleted: boolean; last_modified_matches: boolean }>(
      `SELECT name, record_prefix, deleted_at IS NOT NULL AS deleted, last_modified = $3::timestamptz AS last_modified_matches
         FROM forms WHERE organization_id = $1 AND id = $2`,
      [org, form.id, form.lastModified ?? null],
    );
    const latest = await client.query<{ version: number; published: boolean; same: boolean }>(
      `SELECT version, published_at IS NOT NULL AS published, fields = $3::jsonb AS same
         FROM form_versions WHERE organization_id = $1 AND form_id = $2 ORDER BY version DESC LIMIT 1`,
      [org, form.id, fieldsJson],
    );
    const publish = form.publish ?? true;
    const current = latest.rows[0];
    let versionAction: "none" | "insert" | "updateLatest" = "none";
    if (!current) versionAction = "insert";
    else if (current.published) versionAction = current.same ? "none" : "insert";
    else if (!current.same || publish) versionAction = "updateLatest";

    const row = stored.rows[0];
    const deleted = form.deleted ?? false;
    const rowChanged =
      !row || row.name !== form.name || row.record_prefix !== form.recordPrefix || row.deleted !== deleted || (form.lastModified !== undefined && !row.last_modified_matches);
    if (!row) {
      await client.query(
        `INSERT INTO forms (organization_id, id, name, record_prefix, deleted_at, last_modified)
         VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN clock_timestamp() END, coalesce($6::timestamptz, clock_timestamp()))`,
        [org, form.id, form.name, form.recordPrefix, deleted, form.lastModified ?? null],
      );
      result.inserted++;
    } else if (rowChanged || versionAction !== "none") {
      await client.query(
        `UPDATE forms SET name = $3, record_prefix = $4,
                deleted_at = CASE WHEN $5 THEN coalesce(deleted_at, clock_timestamp()) END,
                last_modified = coalesce($6::timestamptz, clock_timestamp())
          WHERE organization_id = $1 AND id = $2`,
        [org, form.id, form.name, form.recordPrefix, deleted, form.lastModified ?? null],
      );
      result.updated++;
    } else {
      result.unchanged++;
    }
    if (versionAction === "insert") {
      await client.query(
        `INSERT INTO form_versions (organization_id, form_id, version, fields, published_at, created_at)
         VALUES ($1, $2, $3, $4::jsonb, CASE WHEN $5 THEN clock_timestamp() END, clock_timestamp())`,
        [org, form.id, (current?.version ?? 0) + 1, fieldsJson, publish],
      );
    } else if (versionAction === "updateLatest") {
      await client.query(
        `UPDATE form_versions SET fields = $4::jsonb, published_at = CASE WHEN $5 THEN clock_timestamp() END
          WHERE organization_id = $1 AND form_id = $2 AND version = $3`,
        [org, form.id, current!.version, fieldsJson, publish],
      );
    }
  }
  return result;
}
