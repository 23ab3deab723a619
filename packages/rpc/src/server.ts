import * as grpc from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import { serviceDefinition } from "./definition";
import { toServiceError } from "./errors";

type UnaryImpl = (request: any, call: grpc.ServerUnaryCall<any, any>) => Promise<any>;
type StreamImpl = (request: any, call: grpc.ServerWritableStream<any, any>) => Promise<void>;
export type ServiceImpl = Record<string, UnaryImpl | StreamImpl>;

/**
 * Adds a service whose methods are async functions. Thrown errors become gRPC errors carrying
 * the AppError, so the gateway can render the same problem+json the service meant.
 */
export function addService(server: grpc.Server, service: DescService, impl: ServiceImpl): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = impl[method.localName];
    if (!fn) throw new Error(`${service.typeName}.${method.name} is not implemented`);
    if (method.methodKind === "unary") {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
        (fn as UnaryImpl)(call.request, call).then(
          (res) => callback(null, res),
          (err) => callback(toServiceError(err)),
        );
      };
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = (call: grpc.ServerWritableStream<any, any>) => {
        (fn as StreamImpl)(call.request, call).then(
          () => call.end(),
          (err) => {
            if (!call.cancelled) call.emit("error", toServiceError(err));
          },
        );
      };
    } else {
      throw new Error(`${method.methodKind} methods are not supported`);
    }
  }
  server.addService(serviceDefinition(service), handlers);
}

/** Binds and starts a server; resolves with the bound port. */
export function listen(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}

/** Stops accepting calls and waits for in-flight ones up to graceMs, then forces. */
export function shutdown(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
