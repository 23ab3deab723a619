export * from "./fields";
export * from "./columns";
export * from "./derive";
export * from "./render-sql";
export { buildDataset, dropRetiredTables, rebuildFormInTransaction, DEFAULT_DROP_GRACE_MS, type BuildOptions, type BuildResult, type BuildStatus } from "./build";
export { applyPendingChanges, type ApplyOptions, type ApplyResult } from "./maintain";
export { startMaintenanceLoop, CHANGES_CHANNEL, type MaintenanceLoop, type MaintenanceLoopOptions } from "./loop";
export { FORM_DS_SCHEMA, materializedTableName } from "./sql-helpers";
