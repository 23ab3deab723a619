import type { Pool, PoolClient } from "pg";
import { ExportctlError } from "../errors";
import { recomputePaths } from "./paths";
import {
  ATTRIBUTE_KINDS,
  DELETABLE_SECTIONS,
  type ApplyDocument,
  type DeletableSection,
  type FieldInput,
  type FormInput,
} from "./schema";
import { CUSTOM_ATTRIBUTES_DEF, DEVIATIONS_DEF, NOUN_OF, RESOURCE_SECTIONS, SUBMISSIONS_DEF, TABLE_OF, type RefKind } from "./tables";
import { deleteRows, upsertRows, type Row, type UpsertResult } from "./upsert";
import { parseApplyDocument } from "./validate";
import { resolveValues, type ValueContext } from "./values";

export interface SectionResult extends UpsertResult {
  deleted: number;
}
export type ApplyResult = { organizationId: string; sections: Record<string, SectionResult> };

type AnyRecord = Record<string, unknown> & { id: string };

interface AttributeDefinition {
  id: string;
  kind: string;
  key: string;
  type: string;
}

/**
 * Loads an apply document in one transaction: everything or nothing. Records are matched by id and
 * written only when they differ from the stored state (see docs/apply-format.md).
 */
export async function applyDocument(pool: Pool, input: unknown): Promise<ApplyResult> {
  const doc = parseApplyDocument(input);
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await applyInTransaction(client, doc);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

async function applyInTransaction(client: PoolClient, doc: ApplyDocument): Promise<ApplyResult> {
  const org = doc.organization;
  const exists = await client.query("SELECT 1 FROM organizations WHERE id = $1", [org]);
  if (exists.rowCount === 0) {
    throw new ExportctlError("NOT_FOUND", `organization ${org} does not exist; create it first (exportctl org create --id ${org} --name <name>)`);
  }
  // Serializes applies (and record/deviation code allocation) per organization.
  await client.query("SELECT pg_advisory_xact_lock(hashtext('exportctl-apply'), hashtext($1))", [org]);

  // Problems of the document itself, and references to records or attributes that do not exist.
  const problems: string[] = [];
  const referenceProblems: string[] = [];
  const refs = new ReferenceChecker(doc);
  checkIdentities(doc, problems);

  const attributeDefs = await loadAttributeDefinitions(client, doc);
  const formFields = await loadFormFields(client, doc);

  // Resource rows (validated and resolved before anything is written).
  const resourceRows = new Map<string, Row[]>();
  for (const section of RESOURCE_SECTIONS) {
    const records = ((doc as Record<string, unknown>)[section.section] as AnyRecord[] | undefined) ?? [];
    resourceRows.set(
      section.section,
      records.map((rec, i) => {
        const path = `${section.section}[${i}]`;
        collectResourceReferences(section.section, rec, path, refs);
        const row = toRow(section, rec);
        if (section.attributeKind) row.attributes = resolveAttributes(rec.attributes as Record<string, unknown> | undefined, section.attributeKind, attributeDefs, `${path}.attributes`, refs, problems, referenceProblems);
        return row;
      }),
    );
  }

  // Submissions: values keyed by field id; resourceSelect snapshots are taken after resources load.
  const snapshots: PendingSnapshot[] = [];
  let currentSubmission = "";
  const valueContext: ValueContext = {
    problems,
    reference: (kind, id, path) => refs.add(kind, id, path),
    snapshot: (target, kind, locator) => snapshots.push({ target, kind, submissionId: currentSubmission, locator }),
  };
  const submissions = (doc.submissions ?? []).map((s, i) => {
    const path = `submissions[${i}]`;
    currentSubmission = s.id;
    refs.add("forms", s.formId, `${path}.formId`);
    if (s.siteId) refs.add("sites", s.siteId, `${path}.siteId`);
    const fields = formFields.get(s.formId);
    let values: Record<string, unknown> = {};
    let verifications: Record<string, string> = {};
    if (fields) {
      values = resolveValues(fields, s.values ?? {}, `${path}.values`, valueContext);
      verifications = resolveVerifications(fields, s.verifications ?? {}, `${path}.verifications`, problems);
    } else if (s.values && Object.keys(s.values).length > 0) {
      problems.push(`${path}.values: form ${s.formId} has no fields to resolve values against`);
    }
    return { input: s, values, verifications };
  });

  (doc.deviations ?? []).forEach((d, i) => {
    const path = `deviations[${i}]`;
    refs.add("submissions", d.submissionId, `${path}.submissionId`);
    if (d.stepId) refs.add("steps", d.stepId, `${path}.stepId`);
    if (d.assignedUserId) refs.add("employees", d.assignedUserId, `${path}.assignedUserId`);
    if (d.assignedTeamId) refs.add("teams", d.assignedTeamId, `${path}.assignedTeamId`);
    if (d.supplierId) refs.add("suppliers", d.supplierId, `${path}.supplierId`);
    if (d.resolvedById) refs.add("employees", d.resolvedById, `${path}.resolvedById`);
    if (d.signedById) refs.add("employees", d.signedById, `${path}.signedById`);
    if (d.linkedRecordId) refs.add("submissions", d.linkedRecordId, `${path}.linkedRecordId`);
  });

  referenceProblems.push(...(await refs.unknown(client, org)));
  if (problems.length > 0) {
    throw new ExportctlError("INVALID_DOCUMENT", "The apply document is invalid; nothing was loaded.", [...problems, ...referenceProblems]);
  }
  if (referenceProblems.length > 0) {
    throw new ExportctlError("UNKNOWN_REFERENCE", "The apply document refers to records that do not exist; nothing was loaded.", referenceProblems);
  }

  const sections: Record<string, SectionResult> = {};
  const record = (name: string, r: UpsertResult) => (sections[name] = { ...r, deleted: 0 });

  record("customAttributes", await upsertRows(client, org, CUSTOM_ATTRIBUTES_DEF, (doc.customAttributes ?? []).map((a, i) => ({
    id: a.id, resource_kind: a.resourceKind, key: a.key, name: a.name, type: a.type, position: a.position ?? i,
  }))));
  for (const section of RESOURCE_SECTIONS) {
    record(section.section, await upsertRows(client, org, section.def, resourceRows.get(section.section) ?? []));
  }
  record("forms", await applyForms(client, org, doc.forms ?? []));

  await fillSnapshots(client, org, snapshots);
  record("submissions", await upsertRows(client, org, SUBMISSIONS_DEF, await submissionRows(client, org, submissions)));
  record("deviations", await upsertRows(client, org, DEVIATIONS_DEF, await deviationRows(client, org, doc)));

  for (const section of [...DELETABLE_SECTIONS].reverse()) {
    const ids = doc.delete?.[section] ?? [];
    if (ids.length === 0) continue;
    sections[section] ??= { inserted: 0, updated: 0, unchanged: 0, deleted: 0 };
    sections[section].deleted = await deleteSection(client, org, section, ids);
  }
  await recomputePaths(client, org);
  return { organizationId: org, sections };
}

/** Ids may appear once per section, and never both as a record and as a deletion. */
function checkIdentities(doc: ApplyDocument, problems: string[]): void {
  for (const section of DELETABLE_SECTIONS) {
    const records = ((doc as Record<string, unknown>)[section] as { id: string }[] | undefined) ?? [];
    const seen = new Map<string, number>();
    records.forEach((r, i) => {
      if (seen.has(r.id)) problems.push(`${section}[${i}].id: ${r.id} is already used by ${section}[${seen.get(r.id)}]`);
      else seen.set(r.id, i);
    });
    (doc.delete?.[section] ?? []).forEach((id, i) => {
      if (seen.has(id)) problems.push(`delete.${section}[${i}]: ${id} is also declared in ${section}[${seen.get(id)}]`);
    });
  }
}

/**
 * Collects every id the document points at; an id is known when the document declares it, deletes
 * it (the reference is then knowingly left dangling) or it is stored for the organization.
 */
class ReferenceChecker {
  private readonly pending = new Map<RefKind, Map<string, string[]>>();
  private readonly declared = new Map<RefKind, Set<string>>();

  constructor(doc: ApplyDocument) {
    const declare = (kind: RefKind, id: string) => {
      if (!this.declared.has(kind)) this.declared.set(kind, new Set());
      this.declared.get(kind)!.add(id);
    };
    for (const section of DELETABLE_SECTIONS) {
      for (const r of ((doc as Record<string, unknown>)[section] as { id: string }[] | undefined) ?? []) declare(section, r.id);
      for (const id of doc.delete?.[section] ?? []) declare(section, id);
    }
    for (const s of doc.submissions ?? []) for (const step of s.steps ?? []) declare("steps", step.id);
  }

  add(kind: RefKind, id: string, path: string): void {
    if (this.declared.get(kind)?.has(id)) return;
    if (!this.pending.has(kind)) this.pending.set(kind, new Map());
    const byId = this.pending.get(kind)!;
    byId.set(id, [...(byId.get(id) ?? []), path]);
  }

  async unknown(client: PoolClient, org: string): Promise<string[]> {
    const problems: string[] = [];
    for (const [kind, byId] of this.pending) {
      const ids = [...byId.keys()];
      const found = await client.query<{ id: string }>(`SELECT id::text AS id FROM ${TABLE_OF[kind]} WHERE organization_id = $1 AND id = ANY($2::uuid[])`, [org, ids]);
      const stored = new Set(found.rows.map((r) => r.id));
      for (const [id, paths] of byId) {
        if (!stored.has(id)) for (const p of paths) problems.push(`${p}: unknown ${NOUN_OF[kind]} ${id}`);
      }
    }
    return problems;
  }
}

const RELATION_KINDS: Record<string, RefKind> = {
  products: "products",
  parents: "suppliers",
  sites: "sites",
  teams: "teams",
  parentId: "sites",
  siteId: "sites",
  areaId: "areas",
  productId: "products",
  productCategoryId: "productCategories",
  outputProductId: "products",
};

function collectResourceReferences(section: string, rec: AnyRecord, path: string, refs: ReferenceChecker): void {
  for (const [field, kind] of Object.entries(RELATION_KINDS)) {
    const value = rec[field];
    if (value === undefined || value === null) continue;
    // A parent is of the record's own kind.
    const target: RefKind = field === "parentId" ? (section as RefKind) : kind;
    if (Array.isArray(value)) value.forEach((id, i) => refs.add(target, id as string, `${path}.${field}[${i}]`));
    else refs.add(target, value as string, `${path}.${field}`);
  }
}

const COLUMN_DEFAULTS: Record<string, unknown> = { time_zone: "UTC", has_unpublished_changes: false, is_archived: false };
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function toRow(section: (typeof RESOURCE_SECTIONS)[number], rec: AnyRecord): Row {
  const renamed = new Map(Object.entries(section.rename ?? {}).map(([field, column]) => [column, field]));
  const row: Row = { id: rec.id };
  for (const c of section.def.columns) {
    if (c.column === "attributes") continue;
    const field = renamed.get(c.column) ?? camel(c.column);
    const value = rec[field];
    row[c.column] = value === undefined ? (section.section === "documents" && c.column === "status" ? "Draft" : (COLUMN_DEFAULTS[c.column] ?? null)) : value;
  }
  for (const rel of section.def.relations ?? []) {
    const value = rec[rel.property];
    row[rel.property] = rel.property === "versions"
      ? ((value as { id: string; label: string; current?: boolean }[] | undefined) ?? []).map((v) => ({ id: v.id, label: v.label, current: v.current ?? false }))
      : [...new Set((value as string[] | undefined) ?? [])];
  }
  return row;
}

async function loadAttributeDefinitions(client: PoolClient, doc: ApplyDocument): Promise<AttributeDefinition[]> {
  const stored = await client.query<AttributeDefinition>(
    "SELECT id::text AS id, resource_kind AS kind, key, type FROM custom_attribute_definitions WHERE organization_id = $1",
    [doc.organization],
  );
  const byId = new Map(stored.rows.map((d) => [d.id, d]));
  for (const id of doc.delete?.customAttributes ?? []) byId.delete(id);
  for (const a of doc.customAttributes ?? []) byId.set(a.id, { id: a.id, kind: a.resourceKind, key: a.key, type: a.type });
  return [...byId.values()];
}

/**
 * Custom attribute values keyed by attribute key or id → keyed by definition id, stored as entered
 * (ill-fitting values included); Document/SingleDocument values are document ids and are checked.
 */
function resolveAttributes(
  values: Record<string, unknown> | undefined,
  kind: string,
  defs: AttributeDefinition[],
  path: string,
  refs: ReferenceChecker,
  problems: string[],
  referenceProblems: string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const ofKind = defs.filter((d) => d.kind === kind);
  for (const [name, value] of Object.entries(values ?? {})) {
    const here = `${path}.${name}`;
    const byKey = ofKind.filter((d) => d.key === name);
    const def = byKey.length === 1 ? byKey[0] : ofKind.find((d) => d.id === name.toLowerCase());
    if (byKey.length > 1) {
      referenceProblems.push(`${here}: several ${kind} attributes have the key '${name}'; use the attribute id`);
      continue;
    }
    if (!def) {
      referenceProblems.push(`${here}: no custom attribute '${name}' is defined for ${kind}`);
      continue;
    }
    if (value === undefined) continue;
    if (def.type === "Document" || def.type === "SingleDocument") {
      const ids = def.type === "Document" ? value : value === null ? [] : [value];
      if (!Array.isArray(ids) || !ids.every((v) => typeof v === "string" && /^[0-9a-f-]{36}$/i.test(v))) {
        problems.push(`${here}: a ${def.type} attribute holds ${def.type === "Document" ? "an array of document ids" : "one document id"}`);
        continue;
      }
      ids.forEach((id, i) => refs.add("documents", (id as string).toLowerCase(), def.type === "Document" ? `${here}[${i}]` : here));
      out[def.id] = def.type === "Document" ? ids.map((v) => (v as string).toLowerCase()) : value === null ? null : (value as string).toLowerCase();
      continue;
    }
    out[def.id] = value;
  }
  return out;
}

function resolveVerifications(fields: FieldInput[], values: Record<string, string>, path: string, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, at] of Object.entries(values)) {
    const field = fields.find((f) => f.key === name) ?? fields.find((f) => f.id === name.toLowerCase());
    if (!field) problems.push(`${path}.${name}: the form has no field with key or id '${name}'`);
    else if (!field.requiresVerification) problems.push(`${path}.${name}: field '${field.key}' does not require verification`);
    else out[field.id] = at;
  }
  return out;
}

/** The current field tree of every form the document's submissions use (document first, else stored). */
async function loadFormFields(client: PoolClient, doc: ApplyDocument): Promise<Map<string, FieldInput[]>> {
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
async function applyForms(client: PoolClient, org: string, forms: FormInput[]): Promise<UpsertResult> {
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

const SNAPSHOT_TABLE: Partial<Record<RefKind, string>> = Object.fromEntries(
  [...Object.keys(ATTRIBUTE_KINDS), "documents", "sites", "teams"].map((k) => [k, TABLE_OF[k as RefKind]]),
);

interface PendingSnapshot {
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
async function fillSnapshots(client: PoolClient, org: string, snapshots: PendingSnapshot[]): Promise<void> {
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

async function submissionRows(
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

async function deviationRows(client: PoolClient, org: string, doc: ApplyDocument): Promise<Row[]> {
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

/** Join rows owned by a deleted record go with it; rows of others that point at it stay (dangling ids). */
const OWNED_WITHOUT_FOREIGN_KEY: Partial<Record<DeletableSection, [string, string][]>> = {
  suppliers: [["supplier_products", "supplier_id"]],
  customers: [["customer_products", "customer_id"]],
};

async function deleteSection(client: PoolClient, org: string, section: DeletableSection, ids: string[]): Promise<number> {
  for (const [table, column] of OWNED_WITHOUT_FOREIGN_KEY[section] ?? []) {
    await client.query(`DELETE FROM ${table} WHERE organization_id = $1 AND ${column} = ANY($2::uuid[])`, [org, ids]);
  }
  return deleteRows(client, org, TABLE_OF[section], ids);
}
