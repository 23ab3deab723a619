import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { GATEWAY_HTTP_PORT, GRPC_PORT, LIMITS, STREAM_STALL_TIMEOUT_MS } from "../../packages/datasets/src/domain";
import { DEFAULT_LIMIT, MAX_LIMIT } from "../../services/export/src/parameters";
import { buildOpenApiDocument } from "../../services/gateway/src/openapi/document";
import { repoPath } from "./kustomize";

/**
 * The chart's defaults, the Dockerfile and the export's page limit agree with the domain module
 * (packages/datasets/src/domain): the ports and public limits are written there once, and the files
 * that cannot import it are checked against it here.
 */
const values = parse(readFileSync(repoPath("charts", "dataset-export", "values.yaml"), "utf8")) as Record<string, any>;

describe("domain defaults", () => {
  it("the chart's ports are the domain's", () => {
    expect(values.gateway.port).toBe(GATEWAY_HTTP_PORT);
    expect(values.catalog.grpcPort).toBe(GRPC_PORT.catalog);
    expect(values.export.grpcPort).toBe(GRPC_PORT.export);
    expect(values.schema.grpcPort).toBe(GRPC_PORT.schema);
  });

  it("the chart's rate limits are the domain's public limits", () => {
    expect(values.gateway.rateLimit.concurrency).toBe(LIMITS.concurrencyPerOrganization);
    expect(values.gateway.rateLimit.perWindow).toBe(LIMITS.requestsPerWindow);
    expect(values.gateway.rateLimit.windowSeconds).toBe(LIMITS.windowSeconds);
    expect(values.export.dbConnectionsPerOrganization).toBe(LIMITS.concurrencyPerOrganization);
  });

  it("the chart's stream stall timeouts are the domain's default, equal in the gateway and the export", () => {
    expect(values.gateway.streamStallTimeoutMs).toBe(STREAM_STALL_TIMEOUT_MS);
    expect(values.export.streamStallTimeoutMs).toBe(STREAM_STALL_TIMEOUT_MS);
  });

  it("the Dockerfile names no port: the ports are each service's configuration", () => {
    const dockerfile = readFileSync(repoPath("Dockerfile"), "utf8");
    expect(dockerfile).not.toMatch(/^\s*EXPOSE\b/im);
    for (const port of [GATEWAY_HTTP_PORT, ...Object.values(GRPC_PORT)]) expect(dockerfile).not.toContain(String(port));
  });

  it("the export's page limit and the OpenAPI document's are the domain's page size", () => {
    expect(MAX_LIMIT).toBe(LIMITS.pageSize);
    expect(DEFAULT_LIMIT).toBe(LIMITS.pageSize);
    const limits = JSON.stringify(buildOpenApiDocument("test")).match(/"maximum":\d+,"default":\d+/g) ?? [];
    expect(limits.length).toBeGreaterThan(0);
    for (const l of limits) expect(l).toBe(`"maximum":${LIMITS.pageSize},"default":${LIMITS.pageSize}`);
  });
});
