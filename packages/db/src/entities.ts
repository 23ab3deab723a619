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

// dataset_registry has one owner, @exportsvc/datasets (registry.ts): its rows are read and written
// there with plain SQL, never through the ORM, so no entity of it is declared here.

export const entities = [ExportOrganizationSchema, ApiKeySchema];
