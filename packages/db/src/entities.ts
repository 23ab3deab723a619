import { EntitySchema } from "@mikro-orm/core";

/** Export settings of an organization (table export_organizations). */
export interface ExportOrganization {
  organizationId: string;
  exportEnabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const ExportOrganizationSchema = new EntitySchema<ExportOrganization>({
  name: "ExportOrganization",
  tableName: "export_organizations",
  properties: {
    organizationId: { type: "uuid", primary: true, fieldName: "organization_id" },
    exportEnabled: { type: "boolean", fieldName: "export_enabled" },
    createdAt: { type: "Date", fieldName: "created_at", onCreate: () => new Date() },
    updatedAt: { type: "Date", fieldName: "updated_at", onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});

/** An API key (table api_keys). The secret itself is never stored. */
export interface ApiKey {
  id: string;
  organizationId: string;
  secretHash: string;
  description: string;
  createdAt: Date;
  expiresAt?: Date | null;
  revokedAt?: Date | null;
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  name: "ApiKey",
  tableName: "api_keys",
  properties: {
    id: { type: "string", primary: true },
    organizationId: { type: "uuid", fieldName: "organization_id" },
    secretHash: { type: "string", fieldName: "secret_hash", unique: true },
    description: { type: "string" },
    createdAt: { type: "Date", fieldName: "created_at", onCreate: () => new Date() },
    expiresAt: { type: "Date", fieldName: "expires_at", nullable: true },
    revokedAt: { type: "Date", fieldName: "revoked_at", nullable: true },
  },
});

export interface RegistryColumn {
  key: string;
  dataType: string;
  label?: string;
  /** How the export reads the value; interpreted by @exportsvc/datasets. */
  source: Record<string, unknown>;
}

/** A dataset key of an organization (table dataset_registry). */
export interface DatasetRegistryEntry {
  organizationId: string;
  key: string;
  kind: "resource" | "deviations" | "submission" | "grid";
  sourceRef: string;
  displayName?: string | null;
  parentKey?: string | null;
  columns: RegistryColumn[];
  nameAssignments: Record<string, string>;
  shapeFingerprint: string;
  generation: number;
  state: "ready" | "failed" | "retired";
  tableName?: string | null;
  error?: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const DatasetRegistrySchema = new EntitySchema<DatasetRegistryEntry>({
  name: "DatasetRegistryEntry",
  tableName: "dataset_registry",
  properties: {
    organizationId: { type: "uuid", primary: true, fieldName: "organization_id" },
    key: { type: "string", primary: true },
    kind: { type: "string" },
    sourceRef: { type: "string", fieldName: "source_ref" },
    displayName: { type: "string", fieldName: "display_name", nullable: true },
    parentKey: { type: "string", fieldName: "parent_key", nullable: true },
    columns: { type: "json" },
    nameAssignments: { type: "json", fieldName: "name_assignments" },
    shapeFingerprint: { type: "string", fieldName: "shape_fingerprint" },
    generation: { type: "integer" },
    state: { type: "string" },
    tableName: { type: "string", fieldName: "table_name", nullable: true },
    error: { type: "string", nullable: true },
    createdAt: { type: "Date", fieldName: "created_at", onCreate: () => new Date() },
    updatedAt: { type: "Date", fieldName: "updated_at", onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});

export const entities = [ExportOrganizationSchema, ApiKeySchema, DatasetRegistrySchema];
