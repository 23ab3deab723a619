export * from "./fields";
export * from "./columns";
export * from "./derive";
export * from "./render-sql";
export { buildDataset } from "./build";
export {
  DEFAULT_DROP_GRACE_MS,
  DEFAULT_REBUILD_PARALLELISM,
  type BuildOptions,
  type BuildResult,
  type BuildStatus,
  type RebuildOptions,
} from "./build-types";
export { rebuildFormInTransaction } from "./rebuild";
export { openHelperClient } from "./materialize";
export { dropRetiredTables } from "./retired-tables";
export { applyPendingChanges, maintenanceLagSeconds, OrganizationRotation, type ApplyOptions, type ApplyResult, type RebuildReport } from "./maintain";
export { startMaintenanceLoop, CHANGES_CHANNEL, type MaintenanceLoop, type MaintenanceLoopOptions } from "./loop";
export { FORM_DS_SCHEMA, materializedTableName, organizationSchemaName, ensureOrganizationSchema, advisoryLockKeys, formLockKeys, organizationKeysLockKeys } from "./sql-helpers";
