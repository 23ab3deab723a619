import type { PoolClient } from "pg";
import {
  FIXED_DATASETS,
  RESERVED_RESOURCE_COLUMNS,
  attributeDataType,
  lockRegistryRowsByKey,
  loadOrganizationAttributes,
  type OrganizationAttribute,
  type ColumnSpec,
  fixedDatasetSource,
  type FixedDatasetDefinition,
} from "@exportsvc/datasets";
import { assignUniqueNames, composedName } from "@exportsvc/naming";
import type { DatasetSyncer } from "./syncer";
import { writeRegistryEntries, type DesiredRegistryEntry } from "./registry-store";

/**
 * Columns of a fixed dataset: core columns in CSV order, then (resource kinds with custom
 * attributes) one column per attribute definition. An attribute's key goes through the naming rules
 * as a composed name (hash suffix on overflow); a clash with a core column or a reserved name gets
 * `_2`, `_3`. Earlier assignments (`previous`, attribute id -> key) keep names stable.
 */
export function fixedDatasetEntry(
  definition: FixedDatasetDefinition,
  attributes: readonly OrganizationAttribute[],
  previous: Record<string, string>,
): DesiredRegistryEntry {
  const core: ColumnSpec[] = definition.coreColumns.map((c) => ({
    key: c.key,
    dataType: c.dataType,
    ...(c.label !== undefined ? { label: c.label } : {}),
    source: { kind: "core", name: c.key },
  }));
  const own = definition.hasCustomAttributes ? attributes.filter((a) => a.resource_kind === definition.resourceKind) : [];
  const names = assignUniqueNames(
    own.map((a) => ({ sourceId: a.id, name: composedName([a.key]) })),
    { reserved: [...RESERVED_RESOURCE_COLUMNS, ...definition.coreColumns.map((c) => c.key)], previous },
  );
  const attributeColumns: ColumnSpec[] = own.map((a) => ({
    key: names.get(a.id)!,
    dataType: attributeDataType(a.type),
    label: a.name,
    source: { kind: "attribute", attributeId: a.id, attributeType: a.type },
  }));
  return {
    key: definition.key,
    ...fixedDatasetSource(definition),
    ...(definition.displayName !== undefined ? { displayName: definition.displayName } : {}),
    columns: [...core, ...attributeColumns],
    nameAssignments: Object.fromEntries(names),
  };
}

/** Keeps the organization's eleven resource datasets and `deviations` in the registry current. */
export const fixedDatasetsSyncer: DatasetSyncer = {
  name: "fixed-datasets",
  async sync(client: PoolClient, organizationId: string): Promise<number> {
    const attributes = await loadOrganizationAttributes(client, organizationId);
    const stored = await lockRegistryRowsByKey(
      client,
      organizationId,
      FIXED_DATASETS.map((d) => d.key),
    );
    const desired: DesiredRegistryEntry[] = [];
    for (const definition of FIXED_DATASETS) {
      const current = stored.get(definition.key);
      if (current && current.kind !== fixedDatasetSource(definition).kind) {
        // Form dataset keys never take a fixed key (assignDatasetKeys is given them as taken); never overwrite one.
        throw new Error(`registry key ${definition.key} of organization ${organizationId} is held by a ${current.kind} dataset`);
      }
      desired.push(fixedDatasetEntry(definition, attributes, current?.name_assignments ?? {}));
    }
    return writeRegistryEntries(client, organizationId, desired, stored);
  },
};
