import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";

/**
 * protoc-gen-es v2 generates service descriptors, not @grpc/grpc-js definitions. This adapter
 * builds the grpc-js definition from a descriptor, serializing with toBinary/fromBinary.
 */
export function serviceDefinition(service: DescService): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.name,
    } as grpc.MethodDefinition<unknown, unknown>;
  }
  return definition;
}

/** A protobuf `bytes` value or an encoded message as a Buffer over the same memory, without copying. */
export const asBuffer = (data: Uint8Array): Buffer => Buffer.from(data.buffer, data.byteOffset, data.byteLength);

// toBinary returns a fresh array nobody else holds: wrapping it (not Buffer.from(array), which copies)
// spares the export stream one copy of every 64 KiB chunk.
function serializer<D extends DescMessage>(desc: D) {
  return (value: MessageShape<D>) => asBuffer(toBinary(desc, create(desc, value)));
}

function deserializer<D extends DescMessage>(desc: D) {
  return (bytes: Buffer) => fromBinary(desc, bytes);
}
