/**
 * OpenAPI 3 description of the two data endpoints (the open endpoints are deliberately not in it).
 * It describes the API as implemented: listing entries carry `columns` (not `properties`) and
 * `changeToken`. Linted by `npm run lint:openapi -w @exportsvc/gateway`.
 */
export type OpenApiDocument = Record<string, unknown>;

/** Every errorCode the data endpoints can return, by status. New codes may be added within /v1. */
export const ERROR_CODES: Array<{ status: number; errorCode: string; title: string; when: string }> = [
  { status: 400, errorCode: "INVALID_PARAMETER", title: "Invalid parameter", when: "A parameter cannot be parsed or is out of range; `errors` names every parameter at fault." },
  { status: 400, errorCode: "INVALID_CURSOR", title: "Invalid cursor", when: "The cursor is altered, truncated, empty, from another dataset or an older version, or combined with modifiedSince/after/afterRowIndex; or only one of modifiedSince and after was sent; or afterRowIndex without after." },
  { status: 400, errorCode: "MISSING_PARAMETER", title: "Missing required parameter", when: "A grid dataset was paged with modifiedSince and after but without afterRowIndex." },
  { status: 400, errorCode: "BAD_REQUEST", title: "Bad Request", when: "The HTTP request itself could not be parsed (answered before routing)." },
  { status: 431, errorCode: "REQUEST_HEADER_FIELDS_TOO_LARGE", title: "Request Header Fields Too Large", when: "The request's header section is too large (answered before routing)." },
  { status: 401, errorCode: "UNAUTHORIZED", title: "Unauthorized", when: "The API key is missing, malformed, unknown, revoked or expired. No `detail`." },
  { status: 404, errorCode: "ORGANIZATION_NOT_CONFIGURED", title: "Organization not configured", when: "The key is valid but its organization is not enabled for export." },
  { status: 404, errorCode: "DATASET_NOT_FOUND", title: "Dataset not found", when: "No dataset with this key exists for the caller's organization (for example it was renamed)." },
  { status: 404, errorCode: "NOT_FOUND", title: "Not Found", when: "No endpoint matches the path." },
  { status: 405, errorCode: "METHOD_NOT_ALLOWED", title: "Method Not Allowed", when: "The endpoint exists but not for this method; see `Allow`." },
  { status: 429, errorCode: "RATE_LIMITED", title: "Too Many Requests", when: "A per-organization limit was hit; see `Retry-After` and `RateLimit-*`. No `traceId`." },
  { status: 500, errorCode: "INTERNAL_ERROR", title: "Internal Server Error", when: "An unexpected failure. Quote the `traceId`." },
  { status: 503, errorCode: "DATASET_NOT_EXPORTABLE", title: "Dataset cannot be exported", when: "The dataset cannot serve an export right now. No `Retry-After`." },
  { status: 503, errorCode: "AUTH_UNAVAILABLE", title: "Authentication temporarily unavailable", when: "The key store did not answer; the key is fine. Has `Retry-After`." },
  { status: 503, errorCode: "DATABASE_UNAVAILABLE", title: "Database unavailable", when: "A database operation failed. Retry with exponential backoff. No `Retry-After`." },
];

const DATA_TYPES = ["text", "number", "boolean", "dateTime", "localDateTime", "date", "uuid"];

const problemRef = { $ref: "#/components/schemas/Problem" };
const header = (description: string, schema: Record<string, unknown> = { type: "string" }) => ({ description, schema });

const STATUS_DESCRIPTIONS: Record<number, string> = {
  400: "A parameter is unparsable, out of range, or the paging parameters are inconsistent.",
  401: "Authentication failed. Never transient: check the key.",
  404: "Not found.",
  405: "Method not allowed for this endpoint.",
  431: "The request's header section is too large.",
  429: "A rate limit was hit. Wait `Retry-After` seconds and repeat the same request.",
  500: "Unexpected failure. Retry with exponential backoff.",
  503: "Temporarily unable to serve. The cursor is unaffected.",
};

function problemResponse(status: number, codes: string[]): Record<string, unknown> {
  const examples: Record<string, unknown> = {};
  for (const code of codes) {
    const entry = ERROR_CODES.find((e) => e.errorCode === code);
    if (!entry) throw new Error(`unknown error code ${code}`);
    const value: Record<string, unknown> = { type: "about:blank", title: entry.title, status, instance: "/v1/datasets" };
    if (status !== 401) value.detail = entry.when;
    value.errorCode = code;
    if (status !== 429) value.traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    if (code === "INVALID_PARAMETER") value.errors = { limit: ["must be an integer"], modifiedSince: ["must be a date-time with an offset"] };
    examples[code] = { summary: entry.when, value };
  }
  const headers: Record<string, unknown> = {};
  if (status === 429) {
    headers["Retry-After"] = header("Seconds to wait before repeating the request.", { type: "integer" });
    headers["RateLimit-Limit"] = header("The limit that was reached (concurrency cap or per-minute budget).", { type: "integer" });
    headers["RateLimit-Remaining"] = header("Zero on a rejection.", { type: "integer" });
    headers["RateLimit-Reset"] = header("Seconds until capacity is expected.", { type: "integer" });
  }
  if (status === 503) headers["Retry-After"] = header("Seconds to wait; present only with AUTH_UNAVAILABLE.", { type: "integer" });
  if (status === 405) headers.Allow = header("The methods the endpoint supports.");
  return {
    description: `${STATUS_DESCRIPTIONS[status]} errorCode: ${codes.join(", ")}.`,
    ...(Object.keys(headers).length ? { headers } : {}),
    content: { "application/problem+json": { schema: problemRef, examples } },
  };
}

const commonErrorResponses = (notFound: string[], extra: Record<string, unknown> = {}) => ({
  ...extra,
  "401": problemResponse(401, ["UNAUTHORIZED"]),
  "404": problemResponse(404, notFound),
  "405": problemResponse(405, ["METHOD_NOT_ALLOWED"]),
  "431": problemResponse(431, ["REQUEST_HEADER_FIELDS_TOO_LARGE"]),
  "429": problemResponse(429, ["RATE_LIMITED"]),
  "500": problemResponse(500, ["INTERNAL_ERROR"]),
});

const instantParameter = (name: string, description: string) => ({
  name,
  in: "query",
  required: false,
  description,
  schema: { type: "string", format: "date-time" },
  example: "2024-05-01 12:30:00.123456+00",
});

export function buildOpenApiDocument(version: string): OpenApiDocument {
  return {
    openapi: "3.0.3",
    info: {
      title: "Dataset Export API",
      version,
      description:
        "Read-only export of an organization's captured data as CSV datasets, paged with a resumable cursor. " +
        "Every response is filtered to the organization that owns the API key. Errors are application/problem+json; " +
        "branch on the status and `errorCode` (an open set: handle an unknown code by its status).",
      license: { name: "Proprietary", url: "https://example.invalid/terms" },
    },
    servers: [{ url: "/", description: "This service (data paths sit under /v1)" }],
    security: [{ apiKey: [] }],
    tags: [{ name: "Datasets", description: "The dataset listing and one dataset's CSV pages." }],
    paths: {
      "/v1/datasets": {
        get: {
          tags: ["Datasets"],
          operationId: "listDatasets",
          summary: "List the organization's datasets with their current columns",
          description:
            "One entry per dataset. Null fields are omitted, never sent as null. `ETag` is on every response; " +
            "send it back in `If-None-Match` to get a 304 when nothing at all changed.",
          parameters: [
            { name: "If-None-Match", in: "header", required: false, description: "An ETag from a previous listing response.", schema: { type: "string" } },
          ],
          responses: {
            "200": {
              description: "The listing.",
              headers: {
                ETag: header("Validator of the whole listing."),
                "Cache-Control": header("Always `private, no-cache`."),
              },
              content: { "application/json": { schema: { type: "array", items: { $ref: "#/components/schemas/DatasetListingEntry" } } } },
            },
            "304": { description: "Nothing changed since the ETag sent in If-None-Match. No body.", headers: { ETag: header("Validator of the whole listing.") } },
            "400": problemResponse(400, ["BAD_REQUEST"]),
            ...commonErrorResponses(["ORGANIZATION_NOT_CONFIGURED"]),
            "503": problemResponse(503, ["AUTH_UNAVAILABLE", "DATABASE_UNAVAILABLE"]),
          },
        },
      },
      "/v1/datasets/{datasetKey}/csv": {
        get: {
          tags: ["Datasets"],
          operationId: "exportDatasetCsv",
          summary: "Stream one page of a dataset as CSV",
          description:
            "UTF-8 CSV with a byte-order mark and a header row (read headers per response). Rows are in modification order, " +
            "oldest first. Page: call without `cursor`, then with the `_cursor` of the last row; stop when a page has fewer " +
            "rows than the `limit` sent. A failure after the first 64 KiB aborts the connection: retry from the same cursor.",
          parameters: [
            { name: "datasetKey", in: "path", required: true, description: "The `key` from the listing.", schema: { type: "string", maxLength: 63 } },
            {
              name: "cursor",
              in: "query",
              required: false,
              description: "Opaque `_cursor` of the last processed row, sent back unchanged and URL-encoded. Omit for the first page. Not combinable with modifiedSince, after, afterRowIndex.",
              schema: { type: "string" },
            },
            instantParameter(
              "modifiedSince",
              "Original paging parameter: `last_modified` of the last row of the previous page, exactly as received (microsecond precision). Must be sent with `after`. URL-encode the `+` of the offset.",
            ),
            { name: "after", in: "query", required: false, description: "Original tiebreaker: `id` of the last row of the previous page. Must be sent with `modifiedSince`.", schema: { type: "string", format: "uuid" } },
            {
              name: "afterRowIndex",
              in: "query",
              required: false,
              description: "Further tiebreaker for grid datasets: `row_index` of the last row. Requires `after`; rejected on datasets without `row_index`.",
              schema: { type: "integer", format: "int64", minimum: 1 },
            },
            {
              name: "limit",
              in: "query",
              required: false,
              description: "About this many rows: a page is never cut through a group of rows sharing a position, so it can hold a few more. A larger value than the maximum is rejected, never reduced.",
              schema: { type: "integer", format: "int32", minimum: 1, maximum: 5000, default: 5000 },
            },
            instantParameter("from", "Form datasets: rows completed on or after this instant (a grid dataset filters on its submission)."),
            instantParameter("to", "Form datasets: rows completed before this instant (a grid dataset filters on its submission)."),
          ],
          responses: {
            "200": {
              description: "One page of the dataset (chunked; no Content-Length).",
              content: { "text/csv": { schema: { type: "string" }, example: "\ufeffid,last_modified,_cursor\n" } },
            },
            "400": problemResponse(400, ["INVALID_PARAMETER", "INVALID_CURSOR", "MISSING_PARAMETER", "BAD_REQUEST"]),
            ...commonErrorResponses(["DATASET_NOT_FOUND", "ORGANIZATION_NOT_CONFIGURED", "NOT_FOUND"]),
            "503": problemResponse(503, ["DATASET_NOT_EXPORTABLE", "AUTH_UNAVAILABLE", "DATABASE_UNAVAILABLE"]),
          },
        },
      },
    },
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", bearerFormat: "API key", description: "`Authorization: Bearer ak_...` (the key's secret)." },
      },
      schemas: {
        DatasetListingEntry: {
          type: "object",
          required: ["key", "childDatasets", "columns", "links", "changeToken"],
          properties: {
            key: { type: "string", description: "Dataset identifier, used in the CSV path." },
            displayName: { type: "string", description: "Label for display only; absent on resource datasets." },
            parentDataset: { type: "string", description: "On a grid dataset, the key of the dataset one level up." },
            childDatasets: { type: "array", items: { type: "string" }, description: "Keys one level below." },
            columns: { type: "array", items: { $ref: "#/components/schemas/Column" }, description: "Current columns; `_cursor` is last." },
            links: {
              type: "object",
              required: ["csv"],
              properties: { csv: { type: "string", description: "Path of the CSV endpoint, rooted at the host, containing /v1." } },
            },
            changeToken: { type: "string", description: "Opaque marker of the dataset's own contents; compare with its previous value only." },
          },
        },
        Column: {
          type: "object",
          required: ["key", "dataType"],
          properties: {
            key: { type: "string", description: "Exact CSV header." },
            dataType: {
              description: "Additive vocabulary: treat an unknown value as text.",
              anyOf: [{ $ref: "#/components/schemas/DataType" }, { type: "string" }],
            },
            label: { type: "string", description: "Human label, not for matching." },
          },
        },
        DataType: { type: "string", enum: DATA_TYPES },
        ErrorCode: {
          type: "string",
          description: ERROR_CODES.map((e) => `${e.errorCode} (${e.status}): ${e.when}`).join("\n"),
          enum: ERROR_CODES.map((e) => e.errorCode),
        },
        Problem: {
          type: "object",
          description: "RFC 9457 problem details plus errorCode and traceId.",
          properties: {
            type: { type: "string", description: "`about:blank`, or a link to the error's documentation." },
            title: { type: "string" },
            status: { type: "integer" },
            detail: { type: "string", description: "Prose; absent on 401. Do not branch on it." },
            instance: { type: "string", description: "The request path." },
            errorCode: {
              description: "Short upper-case token; new values may be added within /v1.",
              anyOf: [{ $ref: "#/components/schemas/ErrorCode" }, { type: "string" }],
            },
            traceId: { type: "string", pattern: "^[0-9a-f]{32}$", description: "W3C trace id of the request; absent on 429." },
            errors: {
              type: "object",
              description: "INVALID_PARAMETER and MISSING_PARAMETER: parameter name -> messages.",
              additionalProperties: { type: "array", items: { type: "string" } },
            },
          },
          required: ["title", "status", "errorCode"],
        },
      },
    },
  };
}
