export * from "./config";
export * from "./server";
export * from "./listing";
export * from "./list-datasets";
