export * from "./fields";
export * from "./columns";
export * from "./derive";
export * from "./render-sql";
export {
  buildDataset,
  dropRetiredTables,
  openHelperClient,
  rebuildFormInTransaction,
  DEFAULT_DROP_GRACE_MS,
  DEFAULT_REBUILD_PARALLELISM,
  type BuildOptions,
  type BuildResult,
  type BuildStatus,
  type RebuildOptions,
} from "./build";
export { applyPendingChanges, type ApplyOptions, type ApplyResult } from "./maintain";
export { startMaintenanceLoop, CHANGES_CHANNEL, type MaintenanceLoop, type MaintenanceLoopOptions } from "./loop";
export { FORM_DS_SCHEMA, materializedTableName } from "./sql-helpers";
