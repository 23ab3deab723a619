import type { MessageInitShape } from "@bufbuild/protobuf";
import { Errors } from "@exportsvc/common";
import { assignUniqueNames, candidateName } from "@exportsvc/naming";
import type { AssignNamesRequest, AssignNamesResponseSchema } from "@exportsvc/proto";

/** AssignNames: the naming library over gRPC (63-character cap, hash suffixes, clash suffixes, stability). */
export function assignNames(request: AssignNamesRequest): MessageInitShape<typeof AssignNamesResponseSchema> {
  const invalid = request.candidates.filter((c) => c.parts.length === 0 || c.sourceId === "");
  if (invalid.length > 0) {
    throw Errors.invalidParameter({ candidates: ["every candidate needs a source_id and at least one part"] });
  }
  const names = assignUniqueNames(
    request.candidates.map((c) => ({ sourceId: c.sourceId, name: candidateName({ parts: c.parts, prefix: c.prefix, suffix: c.suffix }) })),
    { reserved: request.reserved, previous: new Map(request.previous.map((p) => [p.sourceId, p.name])) },
  );
  return { assignments: [...names].map(([sourceId, name]) => ({ sourceId, name })) };
}
