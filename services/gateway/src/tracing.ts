import { initTelemetry } from "@exportsvc/common";

// Preloaded with `node --import` before src/main.ts: instrumentation patches koa, grpc-js and pg only if
// they are required after tracing has started (packages/common/src/telemetry.ts).
initTelemetry("gateway");
