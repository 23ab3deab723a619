export * from "./normalize";
export * from "./unique";
export * from "./dataset-keys";
