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

function serializer<D extends DescMessage>(desc: D) {
  return (value: MessageShape<D>) => Buffer.from(toBinary(desc, create(desc, value)));
}

function deserializer<D extends DescMessage>(desc: D) {
  return (bytes: Buffer) => fromBinary(desc, bytes);
}
