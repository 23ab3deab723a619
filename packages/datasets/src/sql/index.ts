export * from "./literals";
export * from "./values";
export { RESOURCE_CORE_EXPRESSIONS, RESOURCE_TABLES } from "./resources";
export { DEVIATION_EXPRESSIONS } from "./deviations";
export { attributeExpression, dateAttribute, numberAttribute } from "./attributes";
export * from "./page-query";
export * from "./deletions-query";
export * from "./rewrites-query";
export * from "./rendered";
