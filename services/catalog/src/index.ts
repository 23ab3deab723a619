export * from "./config";
export * from "./server";
export * from "./listing";
export * from "./handlers/list-datasets";
