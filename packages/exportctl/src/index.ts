export * from "./errors";
export * from "./organizations";
export * from "./keys";
export { requestFormRebuilds, type RebuildRequests } from "./forms";
export { applyDocument, type ApplyOptions, type ApplyProgress, type ApplyResult, type SectionResult } from "./apply/apply";
export { parseApplyDocument, readDocumentFile, readDocumentText } from "./apply/validate";
export { ATTRIBUTE_TYPES, FIELD_TYPES, type ApplyDocument, type ApplyDocumentInput, type FieldInput } from "./apply/schema";
export { demoDocument, demoHistoryDocument, seedDemo, DEMO_ORGANIZATION_ID, type SeedDemoResult } from "./demo";
