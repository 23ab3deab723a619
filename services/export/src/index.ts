export { start, type RunningExportService, type StartOptions } from "./main";
export { loadExportConfig, exportConfigSchema, type ExportConfig } from "./config";
