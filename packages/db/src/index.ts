export * from "./pool";
export * from "./migrate";
export * from "./entities";
export * from "./orm";
export * from "./embedded";
export * from "./connection-shares";
export * from "./transaction";
export * from "./copy-stream";
