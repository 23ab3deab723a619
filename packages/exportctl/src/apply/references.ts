import type { PoolClient } from "pg";
import { RECORD_REFERENCES, type ReferringSection } from "@exportsvc/datasets";
import { DELETABLE_SECTIONS, type ApplyDocument } from "./schema";
import { NOUN_OF, TABLE_OF, type RefKind } from "./tables";

export type AnyRecord = Record<string, unknown> & { id: string };

/** Ids may appear once per section, and never both as a record and as a deletion. */
export function checkIdentities(doc: ApplyDocument, problems: string[]): void {
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
export class ReferenceChecker {
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

export function collectResourceReferences(section: string, rec: AnyRecord, path: string, refs: ReferenceChecker): void {
  for (const [field, target] of Object.entries(RECORD_REFERENCES[section as ReferringSection] ?? {})) {
    const value = rec[field];
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) value.forEach((id, i) => refs.add(target, id as string, `${path}.${field}[${i}]`));
    else refs.add(target, value as string, `${path}.${field}`);
  }
}
