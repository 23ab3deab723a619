export * from "./definition";
export * from "./errors";
export * from "./server";
export * from "./client";
export * from "./trace";
export * from "./health";
export * as grpc from "@grpc/grpc-js";
export * from "./service-runtime";
export * from "./handler-errors";
