import { Errors } from "@exportsvc/common";
import { fromServiceError, grpc, toServiceError } from "../src";

describe("fromServiceError: what a gRPC client error becomes at the gateway", () => {
  it("an error our server answered travels whole, a bug included (500)", () => {
    const notFound = fromServiceError(toServiceError(Errors.datasetNotFound("d")));
    expect(notFound).toMatchObject({ status: 404, errorCode: "DATASET_NOT_FOUND" });
    const bug = fromServiceError(toServiceError(new Error("secret internals")));
    expect(bug).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
  });

  it.each([
    ["the service went away", grpc.status.UNAVAILABLE, "No connection established"],
    ["a deadline passed", grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded"],
    ["a stream reset on a cut connection", grpc.status.INTERNAL, "Received RST_STREAM with code 2 triggered by internal client error: Session closed with error code 2"],
    ["a call the transport could not classify", grpc.status.UNKNOWN, "Premature close"],
  ])("a failure of the transport is retryable (503): %s", (_what, code, details) => {
    const err = Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
    expect(fromServiceError(err)).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
  });

  it("anything that is no gRPC error is a bug (500)", () => {
    expect(fromServiceError(new TypeError("x is undefined"))).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
  });
});
