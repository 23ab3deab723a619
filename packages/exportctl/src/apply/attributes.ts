import type { PoolClient } from "pg";
import type { ReferenceChecker } from "./references";
import type { ApplyDocument } from "./schema";

export interface AttributeDefinition {
  id: string;
  kind: string;
  key: string;
  type: string;
}

/** Custom attribute definitions as they will stand after the document: stored, minus deleted, plus declared. */
export async function loadAttributeDefinitions(client: PoolClient, doc: ApplyDocument): Promise<AttributeDefinition[]> {
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
export function resolveAttributes(
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
