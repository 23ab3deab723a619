export * from "./resources";
export * from "./services";
