export * from "./pool";
export * from "./migrate";
export * from "./entities";
export * from "./orm";
export * from "./embedded";
