export * from "./definition";
export * from "./errors";
export * from "./server";
export * from "./client";
export * as grpc from "@grpc/grpc-js";
export * from "./service-runtime";
export * from "./handler-errors";
