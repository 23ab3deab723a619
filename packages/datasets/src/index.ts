export * from "./types";
export * from "./definitions";
export * from "./registry";
export * from "./cursor";
export * from "./sql";
export * from "./tombstones";
export * from "./visibility";
