export { start, type RunningExportService, type StartOptions } from "./server";
export { loadExportConfig, exportConfigSchema, type ExportConfig } from "./config";
