/**
 * OpenAPI 3 description of the two data endpoints (the open endpoints are deliberately not in it).
 * It describes the API as implemented: listing entries carry `columns` (not `properties`) and
 * `changeToken`. Linted by `npm run lint:openapi -w @exportsvc/gateway`.
 */
import { ERROR_CATALOGUE, type ErrorCode } from "@exportsvc/common";
import type { CursorProblem } from "@exportsvc/datasets";
// The domain module alone: it loads nothing (the package index loads pg).
import { LIMITS } from "@exportsvc/datasets/src/domain";
import { INSTANT_PATTERN } from "../csv/timestamp";

export type OpenApiDocument = Record<string, unknown>;

/** The `cursorProblem` values of INVALID_CURSOR (docs/cursor.md); a Record so a new CursorProblem cannot be left out. */
const CURSOR_PROBLEM_TEXT: Record<CursorProblem, string> = {
  empty: "the cursor parameter is empty.",
  not_a_cursor: "the value is not an export cursor (often a '+' sent unencoded).",
  truncated: "the cursor was cut short.",
  altered: "the cursor was changed, or belongs to no dataset of this organization.",
  retired_version: "issued by a cursor version no longer read; restart the dataset.",
  unknown_signing_key: "signed with a key no longer accepted; restart the dataset.",
  other_dataset: "issued for another dataset of this organization.",
  other_feed: "a cursor of the dataset's other feed (a CSV cursor sent to the deletion feed, or the reverse).",
  reshaped_dataset: "the dataset was rebuilt with another row shape; re-read the listing and restart.",
};
export const CURSOR_PROBLEMS = Object.entries(CURSOR_PROBLEM_TEXT).map(([value, when]) => ({ value, when }));

/**
 * When each errorCode of the catalogue is returned; a Record so a catalogued code cannot be left
 * out. Status and title come from the catalogue itself (@exportsvc/common ERROR_CATALOGUE).
 */
const ERROR_WHEN: Record<ErrorCode, string> = {
  INVALID_PARAMETER: "A parameter cannot be parsed or is out of range; `errors` names every parameter at fault.",
  INVALID_CURSOR: "The cursor is altered, truncated, empty, from another dataset or an older version, or combined with modifiedSince/after/afterRowIndex; or only one of modifiedSince and after was sent; or afterRowIndex without after.",
  MISSING_PARAMETER: "A grid dataset was paged with modifiedSince and after but without afterRowIndex.",
  BAD_REQUEST: "The HTTP request itself could not be parsed (answered before routing), or an HTTP/1.1 request has no Host header.",
  REQUEST_TIMEOUT: "The request's header section did not arrive within the header timeout (answered before routing; the connection closes).",
  HTTP_VERSION_NOT_SUPPORTED: "The CSV endpoint was called over HTTP/1.0, where a cut page could not be told from a complete one; use HTTP/1.1 or HTTP/2.",
  REQUEST_HEADER_FIELDS_TOO_LARGE: "The request's header section is too large (answered before routing).",
  DELETIONS_CURSOR_EXPIRED: "Deletion feed only: tombstones after this cursor were pruned by retention. Re-read the dataset in full, then restart its deletion feed without a cursor.",
  REWRITES_CURSOR_EXPIRED: "Rewrite feed only: rewrites after this cursor were pruned by retention. Re-read the dataset in full, then restart its rewrite feed without a cursor.",
  UNAUTHORIZED: "The API key is missing, malformed, unknown, revoked or expired. No `detail`.",
  ORGANIZATION_NOT_CONFIGURED: "The key is valid but its organization is not enabled for export.",
  DATASET_NOT_FOUND: "No dataset with this key exists for the caller's organization (for example it was renamed).",
  NOT_FOUND: "No endpoint matches the path.",
  METHOD_NOT_ALLOWED: "The endpoint exists but not for this method; see `Allow`.",
  RATE_LIMITED: "A per-organization limit was hit; see `Retry-After` and `RateLimit-*`. No `traceId`.",
  INTERNAL_ERROR: "An unexpected failure. Quote the `traceId`.",
  DATASET_NOT_EXPORTABLE: "The dataset cannot serve an export right now. No `Retry-After`.",
  AUTH_UNAVAILABLE: "The key store did not answer; the key is fine. Has `Retry-After`.",
  DATABASE_UNAVAILABLE: "A database operation failed. Retry with exponential backoff. No `Retry-After`.",
};

/** Every errorCode the data endpoints can return, in the catalogue's order. New codes may be added within /v1. */
export const ERROR_CODES: Array<{ status: number; errorCode: ErrorCode; title: string; when: string }> = (Object.keys(ERROR_CATALOGUE) as ErrorCode[]).map(
  (errorCode) => ({ status: ERROR_CATALOGUE[errorCode].status, errorCode, title: ERROR_CATALOGUE[errorCode].title, when: ERROR_WHEN[errorCode] }),
);

const DATA_TYPES = ["text", "number", "boolean", "dateTime", "localDateTime", "date", "uuid"];

const problemRef = { $ref: "#/components/schemas/Problem" };
const header = (description: string, schema: Record<string, unknown> = { type: "string" }) => ({ description, schema });

const STATUS_DESCRIPTIONS: Record<number, string> = {
  400: "A parameter is unparsable, out of range, or the paging parameters are inconsistent.",
  401: "Authentication failed. Never transient: check the key.",
  404: "Not found.",
  405: "Method not allowed for this endpoint.",
  408: "The request's header section did not arrive in time.",
  431: "The request's header section is too large.",
  410: "The deletions cursor is older than the deletion feed's retention.",
  429: "A rate limit was hit. Wait `Retry-After` seconds and repeat the same request.",
  500: "Unexpected failure. Retry with exponential backoff.",
  503: "Temporarily unable to serve. The cursor is unaffected.",
};

function problemResponse(status: number, codes: ErrorCode[]): Record<string, unknown> {
  const examples: Record<string, unknown> = {};
  for (const code of codes) {
    const entry = ERROR_CODES.find((e) => e.errorCode === code);
    if (!entry) throw new Error(`unknown error code ${code}`);
    const value: Record<string, unknown> = { type: "about:blank", title: entry.title, status, instance: "/v1/datasets" };
    if (status !== 401) value.detail = entry.when;
    value.errorCode = code;
    if (status !== 429) value.traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    if (code === "INVALID_CURSOR") value.cursorProblem = "truncated";
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
  if (status === 401) headers["WWW-Authenticate"] = header('RFC 6750 challenge: `Bearer realm="dataset-export"`, with `error="invalid_token"` when a credential was sent and refused.');
  return {
    description: `${STATUS_DESCRIPTIONS[status]} errorCode: ${codes.join(", ")}.`,
    ...(Object.keys(headers).length ? { headers } : {}),
    content: { "application/problem+json": { schema: problemRef, examples } },
  };
}

const commonErrorResponses = (notFound: ErrorCode[], extra: Record<string, unknown> = {}) => ({
  ...extra,
  "401": problemResponse(401, ["UNAUTHORIZED"]),
  "404": problemResponse(404, notFound),
  "405": problemResponse(405, ["METHOD_NOT_ALLOWED"]),
  "408": problemResponse(408, ["REQUEST_TIMEOUT"]),
  "431": problemResponse(431, ["REQUEST_HEADER_FIELDS_TOO_LARGE"]),
  "429": problemResponse(429, ["RATE_LIMITED"]),
  "500": problemResponse(500, ["INTERNAL_ERROR"]),
});

/** The path parameter of every per-dataset endpoint. */
const datasetKeyParameter = () => ({ name: "datasetKey", in: "path", required: true, description: "The `key` from the listing.", schema: { type: "string", maxLength: 63 } });
const cursorParameter = (description: string) => ({ name: "cursor", in: "query", required: false, description, schema: { type: "string" } });
/** A page's `limit`: 1 to the public page size, default that (docs/contract.md, "Limits"). */
const limitParameter = (description: string) => ({
  name: "limit",
  in: "query",
  required: false,
  description,
  schema: { type: "integer", format: "int32", minimum: 1, maximum: LIMITS.pageSize, default: LIMITS.pageSize },
});
const csvPageResponse = (description: string, example: string) => ({ description, content: { "text/csv": { schema: { type: "string" }, example } } });
/** The failures a dataset's CSV page and both its feeds share, after their own 400 (and 410). */
const datasetPageFailures = () => ({
  ...commonErrorResponses(["DATASET_NOT_FOUND", "ORGANIZATION_NOT_CONFIGURED", "NOT_FOUND"]),
  "503": problemResponse(503, ["DATASET_NOT_EXPORTABLE", "AUTH_UNAVAILABLE", "DATABASE_UNAVAILABLE"]),
});

/**
 * Not `format: date-time`: the values the API itself returns (`last_modified`, PostgreSQL's text form
 * `2024-05-01 12:30:00.123456+00`) are not RFC 3339, and strict validators would refuse them. The
 * pattern is the parser's own (csv/timestamp.ts) and admits both forms.
 */
const instantParameter = (name: string, description: string) => ({
  name,
  in: "query",
  required: false,
  description:
    `${description} An instant with an offset: the CSV's own form \`2024-05-01 12:30:00.123456+00\` ` +
    "(as `last_modified` is written) or RFC 3339 `2024-05-01T12:30:00Z`.",
  schema: { type: "string", pattern: INSTANT_PATTERN },
  examples: {
    csvForm: { summary: "As written in last_modified", value: "2024-05-01 12:30:00.123456+00" },
    rfc3339: { summary: "RFC 3339", value: "2024-05-01T12:30:00.123456Z" },
  },
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
      contact: { name: "Dataset export API support", url: "https://example.invalid/support", email: "dataset-export-support@example.invalid" },
    },
    servers: [{ url: "/", description: "This service (data paths sit under /v1)" }],
    security: [{ apiKey: [] }],
    tags: [{ name: "Datasets", description: "The dataset listing, one dataset's CSV pages and its deletion feed." }],
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
            datasetKeyParameter(),
            cursorParameter(
              "Opaque `_cursor` of the last processed row, sent back unchanged and URL-encoded. Omit for the first page. Not combinable with modifiedSince, after, afterRowIndex.",
            ),
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
            limitParameter(
              "About this many rows: a page is never cut through a group of rows sharing a position, so it can hold a few more. A larger value than the maximum is rejected, never reduced.",
            ),
            instantParameter("from", "Form datasets: rows completed on or after this instant (a grid dataset filters on its submission)."),
            instantParameter("to", "Form datasets: rows completed before this instant (a grid dataset filters on its submission)."),
          ],
          responses: {
            "200": csvPageResponse("One page of the dataset (chunked; no Content-Length).", "\ufeffid,last_modified,_cursor\n"),
            "400": problemResponse(400, ["INVALID_PARAMETER", "INVALID_CURSOR", "MISSING_PARAMETER", "HTTP_VERSION_NOT_SUPPORTED", "BAD_REQUEST"]),
            ...datasetPageFailures(),
          },
        },
      },
      "/v1/datasets/{datasetKey}/deletions": {
        get: {
          tags: ["Datasets"],
          operationId: "exportDatasetDeletions",
          summary: "Stream one page of a dataset's deletion feed as CSV",
          description:
            "The rows that left the dataset (a deleted resource, submission with its grid rows, or deviation), oldest first: " +
            "`id` (for a grid dataset: every row of that submission), `deleted_at` (dateTime) and `_cursor`. Same CSV dialect, " +
            "paging loop, limit, authentication and rate limits as the CSV endpoint; a deletions cursor and a CSV cursor are not " +
            "interchangeable. Apply a tombstone only when its `deleted_at` is newer than the stored row's `last_modified`. " +
            "Tombstones are kept for the operator's retention (default 35 days).",
          parameters: [
            datasetKeyParameter(),
            cursorParameter(
              "Opaque `_cursor` of the last processed tombstone of this feed, sent back unchanged and URL-encoded. Omit for the oldest retained tombstone.",
            ),
            limitParameter(
              "About this many tombstones (a page is never cut through tombstones sharing a position). A larger value than the maximum is rejected, never reduced.",
            ),
          ],
          responses: {
            "200": csvPageResponse("One page of the deletion feed (chunked; no Content-Length).", "\ufeffid,deleted_at,_cursor\n"),
            "400": problemResponse(400, ["INVALID_PARAMETER", "INVALID_CURSOR", "BAD_REQUEST"]),
            "410": problemResponse(410, ["DELETIONS_CURSOR_EXPIRED"]),
            ...datasetPageFailures(),
          },
        },
      },
      "/v1/datasets/{datasetKey}/rewrites": {
        get: {
          tags: ["Datasets"],
          operationId: "exportDatasetRewrites",
          summary: "Stream one page of a dataset's rewrite feed as CSV",
          description:
            "The rows whose exported text changed without their `last_modified` moving (a related record renamed, deleted or " +
            "created under an id rows already named; a relation or borrowed column changed), each once with its current text, in " +
            "rewrite order: the dataset's own columns and `_cursor`, exactly as the CSV endpoint renders them. Upsert them by `id` " +
            "(a grid dataset: `id` and `row_index`). Same CSV dialect, paging loop, limit, authentication and rate limits as the " +
            "CSV endpoint; its cursors are its own. Entries are kept for the operator's retention (default 35 days).",
          parameters: [
            datasetKeyParameter(),
            cursorParameter(
              "Opaque `_cursor` of the last processed row of this feed, sent back unchanged and URL-encoded. Omit for the oldest retained rewrite.",
            ),
            limitParameter(
              "About this many rewritten rows (a page is never cut through rows sharing a position). A larger value than the maximum is rejected, never reduced.",
            ),
          ],
          responses: {
            "200": csvPageResponse("One page of the rewrite feed (chunked; no Content-Length); the header row is the dataset's columns, then `_cursor`.", "\ufeffid,name,last_modified,_cursor\n"),
            "400": problemResponse(400, ["INVALID_PARAMETER", "INVALID_CURSOR", "REWRITES_CURSOR_EXPIRED", "BAD_REQUEST"]),
            ...datasetPageFailures(),
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
              properties: {
                csv: { type: "string", description: "Path of the CSV endpoint, rooted at the host, containing /v1." },
                deletions: { type: "string", description: "Path of the dataset's deletion feed, rooted at the host, containing /v1." },
                rewrites: { type: "string", description: "Path of the dataset's rewrite feed, rooted at the host, containing /v1." },
              },
            },
            changeToken: { type: "string", description: "Opaque marker of the dataset's own contents; compare with its previous value only." },
            rewriteToken: {
              type: "string",
              description:
                "Opaque marker that moves when rows' exported text may have changed without their last_modified moving (a republish, a renamed or deleted related record, a renamed site or changed time zone). Moved: re-read the dataset in full. Unchanged: old rows of your copy are still exact.",
            },
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
            cursorProblem: {
              type: "string",
              description:
                "INVALID_CURSOR only: which cursor problem it is (an open set; treat an unknown value as INVALID_CURSOR). " +
                CURSOR_PROBLEMS.map((p) => `${p.value}: ${p.when}`).join(" "),
              enum: CURSOR_PROBLEMS.map((p) => p.value),
            },
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
