import type { Pool, PoolClient } from "pg";
import { declareWriterOrganization } from "@exportsvc/common";
import { inTransaction } from "@exportsvc/db";
import { ExportctlError } from "../errors";
import { loadAttributeDefinitions, resolveAttributes } from "./attributes";
import { deleteSection } from "./deletions";
import { deviationRows } from "./deviations";
import { applyForms, loadFormFields } from "./forms";
import { recomputePaths } from "./paths";
import { checkIdentities, collectResourceReferences, ReferenceChecker, type AnyRecord } from "./references";
import { toRow } from "./resources";
import { DELETABLE_SECTIONS, type ApplyDocument } from "./schema";
import { fillSnapshots, resolveVerifications, submissionRows, type PendingSnapshot } from "./submissions";
import { CUSTOM_ATTRIBUTES_DEF, DEVIATIONS_DEF, RESOURCE_SECTIONS, SUBMISSIONS_DEF } from "./tables";
import { upsertRows, type Row, type UpsertResult } from "./upsert";
import { parseApplyDocument } from "./validate";
import { resolveValues, type ValueContext } from "./values";
import { unknownTimeZoneProblems } from "./time-zones";

export interface SectionResult extends UpsertResult {
  deleted: number;
}
export type ApplyResult = { organizationId: string; sections: Record<string, SectionResult> };

/** Where a running apply is: `done` of `total` steps (checking, one per section, deletions, commit). */
export interface ApplyProgress {
  stage: string;
  done: number;
  total: number;
}
export interface ApplyOptions {
  onProgress?: (progress: ApplyProgress) => void;
}

/**
 * Loads an apply document in one transaction: everything or nothing. Records are matched by id and
 * written only when they differ from the stored state (see docs/apply-format.md).
 */
export async function applyDocument(pool: Pool, input: unknown, opts: ApplyOptions = {}): Promise<ApplyResult> {
  const doc = parseApplyDocument(input);
  // checking + custom attributes + resources + forms + submissions + deviations + deletions + paths + commit
  const total = 8 + RESOURCE_SECTIONS.length;
  let done = 0;
  const step = (stage: string) => opts.onProgress?.({ stage, done: done++, total });
  const result = await inTransaction(pool, async (client) => {
    // The document writes one organization's data only: its open transaction then holds the export
    // visibility horizon for that organization alone (docs/export.md, "Declaring the writer's organization").
    await declareWriterOrganization(client, doc.organization);
    const applied = await applyInTransaction(client, doc, step);
    step("commit");
    return applied;
  });
  opts.onProgress?.({ stage: "done", done: total, total });
  return result;
}

async function applyInTransaction(client: PoolClient, doc: ApplyDocument, step: (stage: string) => void): Promise<ApplyResult> {
  step("checking the document");
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

  problems.push(...(await unknownTimeZoneProblems(client, doc.sites ?? [])));
  referenceProblems.push(...(await refs.unknown(client, org)));
  if (problems.length > 0) {
    throw new ExportctlError("INVALID_DOCUMENT", "The apply document is invalid; nothing was loaded.", [...problems, ...referenceProblems]);
  }
  if (referenceProblems.length > 0) {
    throw new ExportctlError("UNKNOWN_REFERENCE", "The apply document refers to records that do not exist; nothing was loaded.", referenceProblems);
  }

  const sections: Record<string, SectionResult> = {};
  const record = (name: string, r: UpsertResult) => (sections[name] = { ...r, deleted: 0 });

  step("customAttributes");
  record("customAttributes", await upsertRows(client, org, CUSTOM_ATTRIBUTES_DEF, (doc.customAttributes ?? []).map((a, i) => ({
    id: a.id, resource_kind: a.resourceKind, key: a.key, name: a.name, type: a.type, position: a.position ?? i,
  }))));
  for (const section of RESOURCE_SECTIONS) {
    step(section.section);
    record(section.section, await upsertRows(client, org, section.def, resourceRows.get(section.section) ?? []));
  }
  step("forms");
  record("forms", await applyForms(client, org, doc.forms ?? []));

  step("submissions");
  await fillSnapshots(client, org, snapshots);
  record("submissions", await upsertRows(client, org, SUBMISSIONS_DEF, await submissionRows(client, org, submissions)));
  step("deviations");
  record("deviations", await upsertRows(client, org, DEVIATIONS_DEF, await deviationRows(client, org, doc)));

  step("deletions");
  for (const section of [...DELETABLE_SECTIONS].reverse()) {
    const ids = doc.delete?.[section] ?? [];
    if (ids.length === 0) continue;
    sections[section] ??= { inserted: 0, updated: 0, unchanged: 0, deleted: 0 };
    sections[section].deleted = await deleteSection(client, org, section, ids);
  }
  step("site paths");
  await recomputePaths(client, org);
  return { organizationId: org, sections };
}
