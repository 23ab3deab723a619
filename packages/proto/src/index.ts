export * from "./gen/exportsvc/v1/catalog_pb";
export * from "./gen/exportsvc/v1/export_pb";
export * from "./gen/exportsvc/v1/schema_pb";
export * from "./gen/grpc/health/v1/health_pb";
