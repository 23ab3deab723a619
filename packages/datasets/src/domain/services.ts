/**
 * The four services' identities and public limits, written once. Service configs take their
 * defaults from here, scripts/start.ts its ports, the OpenAPI document its limits, and the visibility
 * horizon its list of service sessions; test/deploy/domain-defaults.test.ts checks the chart's
 * defaults and the Dockerfile against it.
 */

export const SERVICE_NAMES = ["gateway", "catalog", "export", "schema"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** One application_name scheme: `exportsvc-<service>[-<role>]`. */
const applicationName = (service: ServiceName, role?: string) => `exportsvc-${service}${role ? `-${role}` : ""}`;

/**
 * The PostgreSQL application_name of each service's sessions: the services name their pools with
 * it, and the horizon ignores these sessions. They never stamp source rows: exports, key checks and
 * listings only read (the catalog's floor upsert writes no source row); the schema service writes
 * registry rows and materialized form tables, governed by the pending change log instead.
 */
export const SERVICE_APPLICATION_NAME = {
  gateway: applicationName("gateway"),
  catalog: applicationName("catalog"),
  export: applicationName("export"),
  schema: applicationName("schema"),
  /** The schema service's LISTEN connection for registry sync requests. */
  schemaRegistryListener: applicationName("schema", "registry-listener"),
} as const;

export const SERVICE_APPLICATION_NAMES: string[] = Object.values(SERVICE_APPLICATION_NAME);

/** Default ports: the gateway's HTTP port, each gRPC service's GRPC_PORT (the address its clients default to). */
export const GATEWAY_HTTP_PORT = 8080;
export const GRPC_PORT = { catalog: 50052, export: 50053, schema: 50054 } as const satisfies Record<Exclude<ServiceName, "gateway">, number>;
export const grpcAddress = (service: keyof typeof GRPC_PORT) => `127.0.0.1:${GRPC_PORT[service]}`;

/**
 * Default of STREAM_STALL_TIMEOUT_MS in both the gateway and the export service: they must agree
 * (the export adds 5 s so that the gateway acts first), so the default is written once.
 */
export const STREAM_STALL_TIMEOUT_MS = 60_000;

/** Public limits (docs/contract.md, "Limits"). */
export const LIMITS = {
  /** Rows of a CSV or deletion page: `limit` is 1 to this, default this. */
  pageSize: 5000,
  /** Requests of one organization in flight at once. */
  concurrencyPerOrganization: 5,
  /** Requests of one organization per window. */
  requestsPerWindow: 600,
  windowSeconds: 60,
} as const;
