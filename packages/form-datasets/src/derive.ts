import { FIXED_DATASETS, shapeFingerprint, type DataType, type StoredRegistryRow } from "@exportsvc/datasets";
import { assignDatasetKeys, assignUniqueNames, directName, normalizeName, truncateWithHash } from "@exportsvc/naming";
import {
  GRID_ENVELOPE,
  GRID_RESERVED,
  SUBMISSION_ENVELOPE,
  SUBMISSION_RESERVED,
  fieldColumns,
  type ColumnCandidate,
  type ColumnRender,
} from "./columns";
import { isGridField, type FormField } from "./fields";

/** What derivation reads of a registry row of this form as it stands before the rebuild (any state). */
export type PreviousDataset = Pick<StoredRegistryRow, "key" | "state" | "generation"> & {
  sourceRef: StoredRegistryRow["source_ref"];
  nameAssignments: StoredRegistryRow["name_assignments"];
};

export interface DeriveInput {
  formId: string;
  formName: string;
  /** The field tree to build from (current tree plus retained removed fields). */
  fields: FormField[];
  /** This form's registry rows, any state. */
  previous: PreviousDataset[];
  /** Every key the organization's registry holds (any state); fixed dataset keys are added here. */
  takenKeys: Iterable<string>;
}

export interface PlannedColumn {
  key: string;
  dataType: DataType;
  label: string;
  /** The text column of the materialized table holding this column's CSV text. */
  tableColumn: string;
  render: ColumnRender;
}

export interface DatasetPlan {
  kind: "submission" | "grid";
  /** `<formId>` or `<formId>/<grid field id>/...` (outermost grid first). */
  sourceRef: string;
  key: string;
  displayName: string;
  parentKey?: string;
  childKeys: string[];
  /** Enclosing grid fields, outermost first, ending with this dataset's own grid (empty for the submission dataset). */
  gridPath: FormField[];
  columns: PlannedColumn[];
  /** Column source id -> assigned key, persisted so clash suffixes stay stable across rebuilds. */
  nameAssignments: Record<string, string>;
  shapeFingerprint: string;
}

const submissionSourceRef = (formId: string) => formId;
const gridSourceRef = (formId: string, path: FormField[]) => [formId, ...path.map((g) => g.id)].join("/");

/** Whether a registry source_ref belongs to this form (its submission dataset or one of its grids). */
export const sourceRefBelongsToForm = (sourceRef: string, formId: string) => sourceRef === formId || sourceRef.startsWith(`${formId}/`);

/**
 * Derives every dataset of a form, pure: keys (collision rules, docs/contract.md §6), display names,
 * parent/children, columns with stable unique names, and the row-shape fingerprint.
 * Datasets come out parents first (submission, then grids depth-first in form order).
 */
export function deriveFormDatasets(input: DeriveInput): DatasetPlan[] {
  const { formId, formName } = input;
  const previousBySource = latestBySourceRef(input.previous);
  const currentKeyBySource = new Map<string, string>();
  for (const p of input.previous) if (p.state !== "retired") currentKeyBySource.set(p.sourceRef, p.key);
  // The fixed datasets' keys are taken in every organization, synced into its registry or not.
  const taken = new Set([...input.takenKeys, ...FIXED_DATASETS.map((d) => d.key)]);

  interface Node {
    sourceRef: string;
    path: FormField[];
    fields: FormField[];
    parent?: Node;
    key?: string;
    children: Node[];
  }
  const root: Node = { sourceRef: submissionSourceRef(formId), path: [], fields: input.fields, children: [] };
  const levels: Node[][] = [[root]];
  for (let depth = 0; depth < levels.length; depth++) {
    const next: Node[] = [];
    for (const node of levels[depth]) {
      for (const f of node.fields) {
        if (!isGridField(f)) continue;
        const path = [...node.path, f];
        const child: Node = { sourceRef: gridSourceRef(formId, path), path, fields: f.fields ?? [], parent: node, children: [] };
        node.children.push(child);
        next.push(child);
      }
    }
    if (next.length > 0) levels.push(next);
  }

  // Keys level by level: a grid's name is composed from its parent's final key.
  for (const level of levels) {
    const candidates = level.map((n) => ({
      sourceId: n.sourceRef,
      name: n.parent ? truncateWithHash(`${n.parent.key}__${normalizeName(n.path[n.path.length - 1].label)}`) : directName(formName),
      hashInput: [formId, ...n.path.map((g) => g.key)].join("/"),
    }));
    const keys = assignDatasetKeys(candidates, { taken, previous: currentKeyBySource });
    for (const n of level) {
      n.key = keys.get(n.sourceRef)!;
      taken.add(n.key);
    }
  }

  const plans: DatasetPlan[] = [];
  const visit = (n: Node) => {
    const previousNames = previousBySource.get(n.sourceRef)?.nameAssignments ?? {};
    const isGrid = n.path.length > 0;
    const fixed = isGrid ? GRID_ENVELOPE : SUBMISSION_ENVELOPE;
    const fixedColumns = fixed.map<Omit<PlannedColumn, "tableColumn">>((c) => ({
      key: c.key,
      dataType: c.dataType,
      label: c.label,
      render: c.key === "row_index" ? { kind: "rowIndex" } : { kind: "envelope", name: c.key },
    }));
    const candidates: ColumnCandidate[] = [];
    n.path.slice(0, -1).forEach((ancestor, i) =>
      candidates.push({
        sourceId: `a:${ancestor.id}`,
        name: truncateWithHash(`${normalizeName(ancestor.key)}_row_index`),
        dataType: "number",
        label: `${ancestor.label} - Row Index`,
        render: { kind: "ancestorRowIndex", depth: i + 1 },
      }),
    );
    for (const f of n.fields) candidates.push(...fieldColumns(f));
    const names = assignUniqueNames(candidates, { reserved: isGrid ? GRID_RESERVED : SUBMISSION_RESERVED, previous: previousNames });
    const all = [
      ...fixedColumns,
      ...candidates.map((c) => ({ key: names.get(c.sourceId)!, dataType: c.dataType, label: c.label, render: c.render })),
    ];
    const columns: PlannedColumn[] = all.map((c, i) => ({ ...c, tableColumn: typedTableColumn(c.render) ?? `c${i + 1}` }));
    plans.push({
      kind: isGrid ? "grid" : "submission",
      sourceRef: n.sourceRef,
      key: n.key!,
      displayName: [formName, ...n.path.map((g) => g.label)].join(" - "),
      parentKey: n.parent?.key,
      childKeys: n.children.map((c) => c.key!),
      gridPath: n.path,
      columns,
      nameAssignments: Object.fromEntries(names),
      shapeFingerprint: shapeFingerprint(columns),
    });
    n.children.forEach(visit);
  };
  visit(root);
  return plans;
}

/**
 * Envelope columns the table already holds in a typed column (its position and filter columns)
 * are served from that column instead of a second, text copy: PostgreSQL prints a uuid, a
 * timestamptz (TimeZone=UTC, DateStyle=ISO) and an integer exactly as the rendered text would be.
 */
function typedTableColumn(render: ColumnRender): string | undefined {
  if (render.kind === "rowIndex") return "row_index";
  if (render.kind === "envelope" && (render.name === "id" || render.name === "last_modified" || render.name === "completed_at")) return render.name;
  return undefined;
}

function latestBySourceRef(rows: PreviousDataset[]): Map<string, PreviousDataset> {
  const out = new Map<string, PreviousDataset>();
  for (const r of rows) {
    const seen = out.get(r.sourceRef);
    // Prefer the live row; among several retired ones the newest generation.
    const better = !seen || (seen.state === "retired" && r.state !== "retired") || (seen.state === r.state && r.generation > seen.generation);
    if (better) out.set(r.sourceRef, r);
  }
  return out;
}

/** Field ids that own columns or datasets in the previous registry state (so survive removal). */
export function fieldIdsWithColumns(previous: PreviousDataset[]): Set<string> {
  const ids = new Set<string>();
  for (const p of previous) {
    if (p.state === "retired") continue;
    for (const sourceId of Object.keys(p.nameAssignments)) {
      const m = /^[fv]:([^:]+)/.exec(sourceId);
      if (m) ids.add(m[1]);
    }
    const segments = p.sourceRef.split("/");
    for (const gridId of segments.slice(1)) ids.add(gridId);
  }
  return ids;
}
