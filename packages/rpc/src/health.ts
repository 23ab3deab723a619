import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "@exportsvc/proto";
import { serviceDefinition } from "./definition";

/**
 * The standard gRPC health checking service (grpc.health.v1.Health, Check and Watch), which
 * Kubernetes' native gRPC probes and grpc-health-probe call. Its messages are generated from the
 * standard proto/grpc/health/v1/health.proto like every other service's.
 */

/** What a service may report about itself; UNKNOWN and SERVICE_UNKNOWN are protocol answers only. */
export type ReportedStatus = "SERVING" | "NOT_SERVING";

/** Sets the status of `service` ("" = the whole server, what probes ask by default). */
export type HealthStatusSetter = (status: ReportedStatus, service?: string) => void;

export interface HealthServiceOptions {
  /** Status of the whole server ("") until set. Default SERVING: a bound server answers calls. */
  initial?: ReportedStatus;
}

/**
 * Plain grpc-js handlers, not addService's: probes call every few seconds, so the calls are neither
 * counted nor logged, and an unknown service is the protocol's bare NOT_FOUND, not an AppError.
 */
interface HealthHandlers extends grpc.UntypedServiceImplementation {
  check: grpc.handleUnaryCall<HealthCheckRequest, HealthCheckResponse>;
  watch: grpc.handleServerStreamingCall<HealthCheckRequest, HealthCheckResponse>;
}

/**
 * Adds grpc.health.v1.Health to the server and returns the setter of its statuses. Set
 * NOT_SERVING when shutdown starts (before draining) so readiness drops before calls are refused.
 */
export function addHealthService(server: grpc.Server, options: HealthServiceOptions = {}): HealthStatusSetter {
  const statuses = new Map<string, ServingStatus>([["", ServingStatus[options.initial ?? "SERVING"]]]);
  const watchers = new Map<string, Set<(status: ServingStatus) => void>>();
  const response = (status: ServingStatus) => create(HealthCheckResponseSchema, { status });

  const handlers: HealthHandlers = {
    check: (call, callback) => {
      const status = statuses.get(call.request.service);
      if (status !== undefined) callback(null, response(status));
      else callback({ code: grpc.status.NOT_FOUND, details: `unknown service '${call.request.service}'` });
    },
    watch: (call) => {
      const service = call.request.service;
      let last: ServingStatus | undefined;
      // Watch sends the status only when it changes, starting with the current one.
      const send = (status: ServingStatus) => {
        if (status !== last) {
          last = status;
          call.write(response(status));
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
      send(statuses.get(service) ?? ServingStatus.SERVICE_UNKNOWN);
    },
  };
  server.addService(serviceDefinition(Health), handlers);

  return (name, service = "") => {
    const status = ServingStatus[name];
    statuses.set(service, status);
    for (const notify of watchers.get(service) ?? []) notify(status);
  };
}
