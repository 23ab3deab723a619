import { ERROR_CATALOGUE, Errors, type ErrorCode } from "@exportsvc/common";
import { buildOpenApiDocument, ERROR_CODES } from "../src/openapi/document";

const doc = buildOpenApiDocument("9.9.9") as any;
const listing = doc.paths["/v1/datasets"].get;
const csv = doc.paths["/v1/datasets/{datasetKey}/csv"].get;
const deletions = doc.paths["/v1/datasets/{datasetKey}/deletions"].get;
const rewrites = doc.paths["/v1/datasets/{datasetKey}/rewrites"].get;

describe("OpenAPI description", () => {
  it("covers the data endpoints only: listing, CSV, deletion and rewrite feeds", () => {
    expect(Object.keys(doc.paths).sort()).toEqual(["/v1/datasets", "/v1/datasets/{datasetKey}/csv", "/v1/datasets/{datasetKey}/deletions", "/v1/datasets/{datasetKey}/rewrites"]);
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

  it("describes the deletion feed: cursor and limit, CSV response, 410 DELETIONS_CURSOR_EXPIRED, links.deletions", () => {
    expect(deletions.parameters.map((p: { name: string }) => p.name).sort()).toEqual(["cursor", "datasetKey", "limit"]);
    expect(Object.keys(deletions.responses["200"].content)).toEqual(["text/csv"]);
    expect(Object.keys(deletions.responses["410"].content["application/problem+json"].examples)).toEqual(["DELETIONS_CURSOR_EXPIRED"]);
    expect(doc.components.schemas.DatasetListingEntry.properties.links.properties).toHaveProperty("deletions");
  });

  it("describes the rewrite feed: cursor and limit, CSV response, 400 REWRITES_CURSOR_EXPIRED, links.rewrites", () => {
    expect(rewrites.parameters.map((p: { name: string }) => p.name).sort()).toEqual(["cursor", "datasetKey", "limit"]);
    expect(Object.keys(rewrites.responses["200"].content)).toEqual(["text/csv"]);
    expect(Object.keys(rewrites.responses["400"].content["application/problem+json"].examples)).toContain("REWRITES_CURSOR_EXPIRED");
    expect(doc.components.schemas.DatasetListingEntry.properties.links.properties).toHaveProperty("rewrites");
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
      Errors.requestTimeout(),
      Errors.httpVersionNotSupported("HTTP/1.0"),
      Errors.methodNotAllowed(["GET"]),
      Errors.rateLimited({ limit: 5, retryAfter: 1, reset: 1, detail: "x" }),
      Errors.internal(),
      Errors.datasetNotExportable("x"),
      Errors.authUnavailable(),
      Errors.databaseUnavailable(),
      Errors.deletionsCursorExpired("x"),
      Errors.rewritesCursorExpired("x"),
    ];
    expect(doc.components.schemas.ErrorCode.enum.sort()).toEqual(catalogue.map((e) => e.errorCode).sort());
    for (const error of catalogue) {
      const published = ERROR_CODES.find((e) => e.errorCode === error.errorCode);
      expect(published).toMatchObject({ status: error.status, title: error.title });
      const examples = [listing, csv, deletions, rewrites].flatMap((op) => Object.keys(op.responses[String(error.status)]?.content?.["application/problem+json"]?.examples ?? {}));
      expect(examples).toContain(error.errorCode);
    }
  });

  it("publishes every entry of the error catalogue with the catalogue's status and title, each with an example", () => {
    const codes = Object.keys(ERROR_CATALOGUE) as ErrorCode[];
    expect(codes.length).toBeGreaterThan(0);
    const operations = [listing, csv, deletions, rewrites];
    const missing = codes.filter((code) => !doc.components.schemas.ErrorCode.enum.includes(code));
    expect(missing).toEqual([]);
    for (const code of codes) {
      const { status, title } = ERROR_CATALOGUE[code];
      const examples = operations.flatMap((op) => {
        const example = op.responses[String(status)]?.content?.["application/problem+json"]?.examples?.[code];
        return example ? [example.value] : [];
      });
      expect({ code, published: examples.length > 0 }).toEqual({ code, published: true });
      for (const value of examples) expect(value).toMatchObject({ status, title, errorCode: code });
    }
    // Nothing in the document that the catalogue does not know.
    expect(doc.components.schemas.ErrorCode.enum.filter((code: string) => !(code in ERROR_CATALOGUE))).toEqual([]);
  });

  it("models the problem body", () => {
    const problem = doc.components.schemas.Problem;
    expect(Object.keys(problem.properties).sort()).toEqual(["cursorProblem", "detail", "errorCode", "errors", "instance", "status", "title", "traceId", "type"]);
  });
});
