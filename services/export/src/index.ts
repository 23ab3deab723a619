export { start, type RunningExportService } from "./main";
export { loadExportConfig, exportConfigSchema, type ExportConfig } from "./config";
