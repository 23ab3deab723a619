import * as grpc from "@grpc/grpc-js";
import type {
  DescMessage,
  DescMethod,
  DescMethodServerStreaming,
  DescMethodUnary,
  DescService,
  MessageInitShape,
  MessageShape,
} from "@bufbuild/protobuf";
import type { Logger, ServiceMetrics } from "@exportsvc/common";
import { serviceDefinition } from "./definition";
import { grpcStatusForError, grpcStatusName, toServiceError } from "./errors";
import { handlerFailure, type HandlerErrorPolicy, type HandlerFailure } from "./handler-errors";
import { callTraceId } from "./trace";

type UnaryHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  call: grpc.ServerUnaryCall<MessageShape<I>, MessageShape<O>>,
) => Promise<MessageInitShape<O>>;

type StreamHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  call: grpc.ServerWritableStream<MessageShape<I>, MessageShape<O>>,
) => Promise<void>;

/**
 * The implementation of a generated service, typed from its descriptor as clients are (client.ts):
 * one async function per method, named by the method's local name. A unary method resolves with its
 * response; a server-streaming one writes to `call` and resolves when done. Either may throw: an
 * AppError reaches the client whole, anything else is answered by the service's HandlerErrorPolicy.
 */
export type ServiceImplementation<S extends DescService> = {
  [K in keyof S["method"]]: S["method"][K] extends DescMethodUnary<infer I extends DescMessage, infer O extends DescMessage>
    ? UnaryHandler<I, O>
    : S["method"][K] extends DescMethodServerStreaming<infer I extends DescMessage, infer O extends DescMessage>
      ? StreamHandler<I, O>
      : never;
};

/** What observes every call a server answers; both optional (tests leave them out). */
export interface CallInstrumentation {
  /** One `rpc` line per call, and every 5xx with its trace id. */
  log?: Logger;
  /** grpc_server_handled_total and grpc_server_handling_seconds. */
  metrics?: ServiceMetrics;
}

type AnyHandler = (request: unknown, call: grpc.ServerUnaryCall<unknown, unknown> & grpc.ServerWritableStream<unknown, unknown>) => Promise<unknown>;

/**
 * Adds a service whose methods are async functions. What a handler throws is answered by the one
 * error policy (handler-errors.ts: AppErrors whole, the database out of reach as the typed 503 when
 * `errors` recognises it, anything else a bare 500) and carried as a gRPC error (status code from
 * errors.ts), so the gateway can render the same problem+json the service meant. Every call is
 * instrumented here, once for all services: counted and timed in `metrics`, logged as one `rpc`
 * line, and, when it answers a 5xx, logged with its trace id and the cause.
 */
export function addService<S extends DescService>(
  server: grpc.Server,
  service: S,
  impl: ServiceImplementation<S>,
  instrumentation: CallInstrumentation = {},
  errors: HandlerErrorPolicy = {},
): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = (impl as Record<string, AnyHandler | undefined>)[method.localName];
    if (!fn) throw new Error(`${service.typeName}.${method.name} is not implemented`);
    const observe = observer(service, method, instrumentation);
    if (method.methodKind === "unary") {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const done = observe(call);
        fn(call.request, call as never).then(
          (res) => {
            done(undefined);
            callback(null, res);
          },
          (err: unknown) => {
            const failure = handlerFailure(err, errors);
            done(failure);
            callback(toServiceError(failure.answer));
          },
        );
      };
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
        const done = observe(call);
        fn(call.request, call as never).then(
          () => {
            done(undefined);
            call.end();
          },
          (err: unknown) => {
            const failure = handlerFailure(err, errors);
            done(failure);
            if (!call.cancelled) call.emit("error", toServiceError(failure.answer));
          },
        );
      };
    } else {
      throw new Error(`${method.methodKind} methods are not supported`);
    }
  }
  server.addService(serviceDefinition(service), handlers);
}

/**
 * Starts observing one call; the returned function ends it with the call's failure (undefined: OK).
 * The `rpc` line is written inside the call's trace context, so it carries the request's trace id:
 * with the gateway's access log line, one request can be followed through every service it reached.
 * The organization id is logged when the request names one (never in metrics: docs/observability.md).
 */
function observer(service: DescService, method: DescMethod, { log, metrics }: CallInstrumentation) {
  const what = `${service.typeName}.${method.name}`;
  return (call: { request: unknown; metadata: grpc.Metadata }) => {
    const started = process.hrtime.bigint();
    return (failure: HandlerFailure | undefined) => {
      const code = grpcStatusName(failure === undefined ? grpc.status.OK : grpcStatusForError(failure.answer));
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics?.observeGrpcCall({ service: service.typeName, method: method.localName, code, durationSeconds: seconds });
      if (!log) return;
      const organizationId = (call.request as { organizationId?: unknown } | undefined)?.organizationId;
      log.info(
        {
          grpcService: service.typeName,
          grpcMethod: method.localName,
          grpcCode: code,
          organizationId: typeof organizationId === "string" && organizationId !== "" ? organizationId : undefined,
          durationMs: Math.round(seconds * 1e4) / 10,
        },
        "rpc",
      );
      if (failure !== undefined) logServerError(log, what, call, failure);
    };
  };
}

/**
 * Every 5xx a service answers is logged by that service, with the call's trace id, so the
 * client's traceId leads to the cause: a failure that is not an AppError (a bug, a database error)
 * in full; the database out of reach, and a typed 5xx, as a warning. 4xx are the caller's business
 * and are not logged here.
 */
function logServerError(log: Logger, what: string, call: { metadata: grpc.Metadata }, { answer, cause }: HandlerFailure): void {
  const fields = { traceId: callTraceId(call.metadata), status: answer.status, errorCode: answer.errorCode };
  if (cause === undefined) {
    if (answer.status >= 500) log.warn(fields, `${what} answered ${answer.status}`);
    return;
  }
  if (answer.status === 503) log.warn({ ...fields, err: cause }, `${what}: database unavailable`);
  else log.error({ ...fields, err: cause }, `${what} failed`);
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
