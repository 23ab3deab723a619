// Types only: @exportsvc/common is loaded before tracing starts, and instrumentation can patch
// grpc-js only if it is required after that (see telemetry.ts).
import type * as grpc from "@grpc/grpc-js";

/** grpc.status.NOT_FOUND, without loading grpc-js here. */
const GRPC_STATUS_NOT_FOUND = 5;

/**
 * The standard gRPC health checking service (grpc.health.v1.Health, Check and Watch), which
 * Kubernetes' native gRPC probes and grpc-health-probe call.
 *
 * Its two messages have one field each, so they are encoded here by hand: the grpc-health-check
 * package loads its .proto from its own directory at run time, which breaks in the services'
 * esbuild bundles, and a generated descriptor would add a second proto tree to packages/proto.
 *
 *   message HealthCheckRequest  { string service = 1; }
 *   message HealthCheckResponse { ServingStatus status = 1; }
 *   enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
 */

export const SERVING_STATUS = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;
export type ServingStatusName = keyof typeof SERVING_STATUS;
/** What a service may report about itself; UNKNOWN and SERVICE_UNKNOWN are protocol answers only. */
export type ReportedStatus = "SERVING" | "NOT_SERVING";

/** Sets the status of `service` ("" = the whole server, what probes ask by default). */
export type HealthStatusSetter = (status: ReportedStatus, service?: string) => void;

export interface HealthServiceOptions {
  /** Status of the whole server ("") until set. Default SERVING: a bound server answers calls. */
  initial?: ReportedStatus;
}

const STATUS_NAMES = Object.fromEntries(Object.entries(SERVING_STATUS).map(([k, v]) => [v, k])) as Record<number, ServingStatusName>;

function encodeVarint(value: number): number[] {
  const out: number[] = [];
  let v = value >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

function readVarint(buf: Buffer, offset: number): [value: number, next: number] {
  let value = 0;
  let shift = 0;
  let pos = offset;
  for (;;) {
    if (pos >= buf.length) throw new Error("truncated varint");
    const byte = buf[pos++];
    if (shift < 32) value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, pos];
    shift += 7;
    if (shift > 63) throw new Error("varint too long");
  }
}

/** Walks a message's fields, handing each (field number, wire type, payload) to `visit`; unknown fields are skipped. */
function forEachField(buf: Buffer, visit: (field: number, wireType: number, value: number | Buffer) => void): void {
  let pos = 0;
  while (pos < buf.length) {
    const [tag, afterTag] = readVarint(buf, pos);
    const field = Math.floor(tag / 8);
    const wireType = tag & 7;
    pos = afterTag;
    if (wireType === 0) {
      const [value, next] = readVarint(buf, pos);
      visit(field, wireType, value);
      pos = next;
    } else if (wireType === 2) {
      const [length, start] = readVarint(buf, pos);
      if (start + length > buf.length) throw new Error("truncated field");
      visit(field, wireType, buf.subarray(start, start + length));
      pos = start + length;
    } else if (wireType === 1) {
      pos += 8;
    } else if (wireType === 5) {
      pos += 4;
    } else {
      throw new Error(`unsupported wire type ${wireType}`);
    }
  }
}

export interface HealthCheckRequest {
  service: string;
}
export interface HealthCheckResponse {
  status: ServingStatusName;
}

export function encodeHealthCheckRequest(req: HealthCheckRequest): Buffer {
  const bytes = Buffer.from(req.service ?? "", "utf8");
  return bytes.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a, ...encodeVarint(bytes.length)]), bytes]);
}

export function decodeHealthCheckRequest(buf: Buffer): HealthCheckRequest {
  let service = "";
  forEachField(buf, (field, wireType, value) => {
    if (field === 1 && wireType === 2) service = (value as Buffer).toString("utf8");
  });
  return { service };
}

export function encodeHealthCheckResponse(res: HealthCheckResponse): Buffer {
  const code = SERVING_STATUS[res.status];
  return code === 0 ? Buffer.alloc(0) : Buffer.from([0x08, ...encodeVarint(code)]);
}

export function decodeHealthCheckResponse(buf: Buffer): HealthCheckResponse {
  let code = 0;
  forEachField(buf, (field, wireType, value) => {
    if (field === 1 && wireType === 0) code = value as number;
  });
  return { status: STATUS_NAMES[code] ?? "UNKNOWN" };
}

const method = (name: "Check" | "Watch", responseStream: boolean): grpc.MethodDefinition<HealthCheckRequest, HealthCheckResponse> => ({
  path: `/grpc.health.v1.Health/${name}`,
  requestStream: false,
  responseStream,
  requestSerialize: encodeHealthCheckRequest,
  requestDeserialize: decodeHealthCheckRequest,
  responseSerialize: encodeHealthCheckResponse,
  responseDeserialize: decodeHealthCheckResponse,
  originalName: name.toLowerCase(),
});

/** The grpc-js definition of grpc.health.v1.Health (usable for clients too, e.g. in tests or exportctl). */
export const HEALTH_SERVICE_DEFINITION = {
  check: method("Check", false),
  watch: method("Watch", true),
} satisfies grpc.ServiceDefinition;

/**
 * Adds grpc.health.v1.Health to the server and returns the setter of its statuses. Set
 * NOT_SERVING when shutdown starts (before draining) so readiness drops before calls are refused.
 */
export function addHealthService(server: grpc.Server, options: HealthServiceOptions = {}): HealthStatusSetter {
  const statuses = new Map<string, ReportedStatus>([["", options.initial ?? "SERVING"]]);
  const watchers = new Map<string, Set<(status: ServingStatusName) => void>>();

  server.addService(HEALTH_SERVICE_DEFINITION, {
    check: (call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, callback: grpc.sendUnaryData<HealthCheckResponse>) => {
      const status = statuses.get(call.request.service);
      if (status) callback(null, { status });
      else callback({ code: GRPC_STATUS_NOT_FOUND, details: `unknown service '${call.request.service}'` });
    },
    watch: (call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
      const service = call.request.service;
      let last: ServingStatusName | undefined;
      // Watch sends the status only when it changes, starting with the current one.
      const send = (status: ServingStatusName) => {
        if (status !== last) {
          last = status;
          call.write({ status });
        }
      };
      const set = watchers.get(service) ?? new Set();
      watchers.set(service, set);
      set.add(send);
      const stop = () => {
        set.delete(send);
        if (set.size === 0 && watchers.get(service) === set) watchers.delete(service);
      };
      call.on("cancelled", stop);
      call.on("close", stop);
      send(statuses.get(service) ?? "SERVICE_UNKNOWN");
    },
  });

  return (status, service = "") => {
    statuses.set(service, status);
    for (const notify of watchers.get(service) ?? []) notify(status);
  };
}
