import { Errors } from "@exportsvc/common";
import { buildOpenApiDocument, ERROR_CODES } from "../src/openapi/document";

const doc = buildOpenApiDocument("9.9.9") as any;
const listing = doc.paths["/v1/datasets"].get;
const csv = doc.paths["/v1/datasets/{datasetKey}/csv"].get;

describe("OpenAPI description", () => {
  it("covers the two data endpoints only", () => {
    expect(Object.keys(doc.paths).sort()).toEqual(["/v1/datasets", "/v1/datasets/{datasetKey}/csv"]);
    expect(doc.info.version).toBe("9.9.9");
  });

  it("declares the bearer scheme with format 'API key' for every operation", () => {
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: "API key" });
    expect(doc.security).toEqual([{ apiKey: [] }]);
  });

  it("lists every query parameter of the CSV endpoint", () => {
    const names = csv.parameters.map((p: { name: string }) => p.name).sort();
    expect(names).toEqual(["after", "afterRowIndex", "cursor", "datasetKey", "from", "limit", "modifiedSince", "to"]);
    const limit = csv.parameters.find((p: { name: string }) => p.name === "limit");
    expect(limit.schema).toMatchObject({ type: "integer", format: "int32", minimum: 1, maximum: 5000, default: 5000 });
  });

  it("describes the CSV response and the listing with columns", () => {
    expect(Object.keys(csv.responses["200"].content)).toEqual(["text/csv"]);
    const entry = doc.components.schemas.DatasetListingEntry;
    expect(entry.required).toEqual(expect.arrayContaining(["key", "childDatasets", "columns", "links", "changeToken"]));
    expect(entry.properties).not.toHaveProperty("properties");
    expect(listing.responses["304"]).toBeDefined();
  });

  it("publishes every errorCode the catalogue can produce, each with an example on an operation", () => {
    const catalogue = [
      Errors.invalidParameter({ a: ["b"] }),
      Errors.invalidCursor("x"),
      Errors.missingParameter("afterRowIndex", "x"),
      Errors.unauthorized(),
      Errors.organizationNotConfigured(),
      Errors.datasetNotFound("x"),
      Errors.routeNotFound(),
      Errors.badRequest(),
      Errors.headersTooLarge(),
      Errors.methodNotAllowed(["GET"]),
      Errors.rateLimited({ limit: 5, retryAfter: 1, reset: 1, detail: "x" }),
      Errors.internal(),
      Errors.datasetNotExportable("x"),
      Errors.authUnavailable(),
      Errors.databaseUnavailable(),
    ];
    expect(doc.components.schemas.ErrorCode.enum.sort()).toEqual(catalogue.map((e) => e.errorCode).sort());
    for (const error of catalogue) {
      const published = ERROR_CODES.find((e) => e.errorCode === error.errorCode);
      expect(published).toMatchObject({ status: error.status, title: error.title });
      const examples = [listing, csv].flatMap((op) => Object.keys(op.responses[String(error.status)]?.content?.["application/problem+json"]?.examples ?? {}));
      expect(examples).toContain(error.errorCode);
    }
  });

  it("models the problem body", () => {
    const problem = doc.components.schemas.Problem;
    expect(Object.keys(problem.properties).sort()).toEqual(["detail", "errorCode", "errors", "instance", "status", "title", "traceId", "type"]);
  });
});
