import { booleanText, dateTimeText, localDateTimeText, personName } from "./values";
import { ROW } from "./resources";

/**
 * The `deviations` dataset, read live. The page row `r` is the deviation; the outer query joins
 * the records it borrows from under these aliases (see DEVIATION_JOINS).
 */
const employeeName = (alias: string) => `CASE WHEN ${alias}.id IS NOT NULL THEN ${personName(`${alias}.first_name`, `${alias}.last_name`)} END`;

const zone = "site.time_zone";
/** The signature exists only for a resolution by comment that was signed (docs/contract.md §9). */
const signedCommentResolution = `${ROW}.status = 'Resolved' AND ${ROW}.resolution_type = 'Comment' AND ${ROW}.signed_at IS NOT NULL`;

/**
 * One related record by id, as a LATERAL look-up: `LIMIT 1` keeps the planner from turning it into a
 * hash join, which would scan the whole related table (every organization's submissions, employees)
 * for each page; a page needs at most `limit` index probes per relation.
 */
const byOrg = (alias: string, table: string, idExpr: string) =>
  `LEFT JOIN LATERAL (SELECT * FROM ${table} x WHERE x.organization_id = ${ROW}.organization_id AND x.id = ${idExpr} LIMIT 1) ${alias} ON true`;

export const DEVIATION_JOINS = [
  byOrg("sub", "submissions", `${ROW}.submission_id`),
  byOrg("form", "forms", "sub.form_id"),
  byOrg("step", "submission_steps", `${ROW}.step_id`),
  byOrg("site", "sites", "sub.site_id"),
  byOrg("assignee", "employees", `${ROW}.assigned_user_id`),
  byOrg("team", "teams", `${ROW}.assigned_team_id`),
  byOrg("supplier", "suppliers", `${ROW}.supplier_id`),
  byOrg("resolver", "employees", `${ROW}.resolved_by_id`),
  byOrg("signer", "employees", `${ROW}.signed_by_id`),
  byOrg("linked", "submissions", `${ROW}.linked_record_id`),
  byOrg("linked_form", "forms", "linked.form_id"),
].join("\n");

export const DEVIATION_EXPRESSIONS: Record<string, string> = {
  id: `${ROW}.id::text`,
  code: `${ROW}.code`,
  severity: `${ROW}.severity`,
  status: `${ROW}.status`,
  is_resolved: booleanText(`${ROW}.status = 'Resolved'`),
  resolution_type: `${ROW}.resolution_type`,
  field_key: `${ROW}.field_key`,
  field_label: `${ROW}.field_label`,
  display_value: `${ROW}.display_value`,
  row_id: `${ROW}.row_id`,
  workflow_name: "form.name",
  form_name: "form.name",
  submission_id: `${ROW}.submission_id::text`,
  record_id: "sub.record_id",
  submission_status: "sub.status",
  is_archived: booleanText("sub.is_archived"),
  step_name: "step.name",
  step_status: "step.status",
  site_name: "site.name",
  site_id: "sub.site_id::text",
  site_path: "site.path",
  assigned_to: `coalesce(${employeeName("assignee")}, team.name)`,
  assigned_user_name: employeeName("assignee"),
  assigned_team_name: "team.name",
  supplier_name: "supplier.name",
  comment: `${ROW}.comment`,
  resolution_comment: `${ROW}.resolution_comment`,
  resolved_by: employeeName("resolver"),
  resolved_at: dateTimeText(`${ROW}.resolved_at`),
  resolved_at_local: localDateTimeText(`${ROW}.resolved_at`, zone),
  signed_by: `CASE WHEN ${signedCommentResolution} THEN ${employeeName("signer")} END`,
  signed_at: `CASE WHEN ${signedCommentResolution} THEN ${dateTimeText(`${ROW}.signed_at`)} END`,
  signed_at_local: `CASE WHEN ${signedCommentResolution} THEN ${localDateTimeText(`${ROW}.signed_at`, zone)} END`,
  linked_record_code: "linked.record_id",
  linked_record_status: "linked.status",
  linked_record_source: "linked_form.name",
  linked_resolution_comment: `${ROW}.linked_resolution_comment`,
  created_at: dateTimeText(`${ROW}.created_at`),
  created_at_local: localDateTimeText(`${ROW}.created_at`, zone),
  last_modified: dateTimeText(`${ROW}.last_modified`),
  last_modified_local: localDateTimeText(`${ROW}.last_modified`, zone),
};
