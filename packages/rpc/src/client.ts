import * as grpc from "@grpc/grpc-js";
import type { DescMessage, DescMethodServerStreaming, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { serviceDefinition } from "./definition";
import { fromServiceError } from "./errors";

type UnaryMethods<S extends DescService> = {
  [K in keyof S["method"] as S["method"][K] extends DescMethodUnary ? K : never]: S["method"][K] extends DescMethodUnary<
    infer I extends DescMessage,
    infer O extends DescMessage
  >
    ? (request: MessageInitShape<I>, options?: CallOptions) => Promise<MessageShape<O>>
    : never;
};

type StreamMethods<S extends DescService> = {
  [K in keyof S["method"] as S["method"][K] extends DescMethodServerStreaming ? K : never]: S["method"][K] extends DescMethodServerStreaming<
    infer I extends DescMessage,
    infer O extends DescMessage
  >
    ? (request: MessageInitShape<I>, options?: CallOptions) => grpc.ClientReadableStream<MessageShape<O>>
    : never;
};

export type Client<S extends DescService> = UnaryMethods<S> & StreamMethods<S> & { close(): void; raw: grpc.Client };

/** Per-stream HTTP/2 receive window of clients (bytes). */
export const FLOW_CONTROL_WINDOW_BYTES = 4 * 1024 * 1024;

export interface CallOptions {
  deadlineMs?: number;
  metadata?: grpc.Metadata;
}

/**
 * A typed client: unary methods return promises that reject with the server's AppError;
 * server-streaming methods return the grpc-js readable stream (errors on it go through fromServiceError).
 * `channelOptions` override the defaults below (tests lower the receive limit to prove streaming).
 */
export function createClient<S extends DescService>(service: S, address: string, channelOptions: grpc.ChannelOptions = {}): Client<S> {
  const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(service), service.typeName);
  const raw = new Ctor(address, grpc.credentials.createInsecure(), {
    "grpc.keepalive_time_ms": 30_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    // HTTP/2's default 64 KiB window makes the export stream wait for a WINDOW_UPDATE after every
    // chunk; a few MiB keep it flowing (memory stays bounded by the window).
    "grpc-node.flow_control_window": FLOW_CONTROL_WINDOW_BYTES,
    ...channelOptions,
  }) as unknown as grpc.Client & Record<string, Function>;
  const client: Record<string, unknown> = { close: () => raw.close(), raw };
  for (const method of service.methods) {
    const name = method.localName;
    const callOpts = (o?: CallOptions): grpc.CallOptions =>
      o?.deadlineMs ? { deadline: new Date(Date.now() + o.deadlineMs) } : {};
    if (method.methodKind === "unary") {
      client[name] = (request: unknown, options?: CallOptions) =>
        new Promise((resolve, reject) => {
          raw[name](request, options?.metadata ?? new grpc.Metadata(), callOpts(options), (err: grpc.ServiceError | null, res: unknown) =>
            err ? reject(fromServiceError(err)) : resolve(res),
          );
        });
    } else if (method.methodKind === "server_streaming") {
      client[name] = (request: unknown, options?: CallOptions) =>
        raw[name](request, options?.metadata ?? new grpc.Metadata(), callOpts(options));
    }
  }
  return client as Client<S>;
}
