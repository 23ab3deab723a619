export * from "./config";
export * from "./server";
export * from "./sync/syncer";
export * from "./sync/registry-store";
export * from "./sync/organization-sync";
export * from "./sync/fixed-datasets";
export * from "./queue/registry-sync-worker";
export * from "./sync/definitions-resync";
