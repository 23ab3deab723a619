/**
 * Every failure a client can see is an AppError: a typed value carrying its HTTP status and
 * errorCode. The gateway maps it to application/problem+json in one place; internal services carry
 * it across gRPC unchanged (see @exportsvc/rpc).
 */
export interface ProblemFields {
  status: number;
  errorCode: string;
  title: string;
  detail?: string;
  /** Parameter name -> messages, for INVALID_PARAMETER. */
  errors?: Record<string, string[]>;
  /** Seconds, sent as Retry-After. */
  retryAfter?: number;
  /** Extra members of the problem body (e.g. checks on /health/ready). */
  extensions?: Record<string, unknown>;
  /** Extra response headers (e.g. RateLimit-*, Allow). */
  headers?: Record<string, string>;
  /** The 429 body has no traceId. */
  omitTraceId?: boolean;
}

export class AppError extends Error implements ProblemFields {
  readonly status: number;
  readonly errorCode: string;
  readonly title: string;
  readonly detail?: string;
  readonly errors?: Record<string, string[]>;
  readonly retryAfter?: number;
  readonly extensions?: Record<string, unknown>;
  readonly headers?: Record<string, string>;
  readonly omitTraceId?: boolean;

  constructor(fields: ProblemFields) {
    super(fields.detail ?? fields.title);
    this.name = "AppError";
    this.status = fields.status;
    this.errorCode = fields.errorCode;
    this.title = fields.title;
    this.detail = fields.detail;
    this.errors = fields.errors;
    this.retryAfter = fields.retryAfter;
    this.extensions = fields.extensions;
    this.headers = fields.headers;
    this.omitTraceId = fields.omitTraceId;
  }

  toFields(): ProblemFields {
    return {
      status: this.status,
      errorCode: this.errorCode,
      title: this.title,
      detail: this.detail,
      errors: this.errors,
      retryAfter: this.retryAfter,
      extensions: this.extensions,
      headers: this.headers,
      omitTraceId: this.omitTraceId,
    };
  }
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;

/** Longest stretch of caller input a `detail` quotes; the rest is cut (the caller knows what it sent). */
const QUOTED_INPUT_MAX = 80;
const QUOTABLE = /^[A-Za-z0-9_.~-]$/;

/**
 * Caller input as a `detail` may quote it: every character outside `[A-Za-z0-9_.~-]` is
 * percent-encoded as UTF-8 (a lone surrogate as U+FFFD), so a problem body never carries markup,
 * control characters or text that could pass for the service's own words, and long input is cut.
 */
export function quoteInput(value: string): string {
  let out = "";
  let count = 0;
  for (const char of value) {
    if (count++ === QUOTED_INPUT_MAX) return `'${out}…'`;
    if (QUOTABLE.test(char)) {
      out += char;
      continue;
    }
    const code = char.codePointAt(0)!;
    const wellFormed = code < 0xd800 || code > 0xdfff ? char : "\uFFFD";
    for (const byte of Buffer.from(wellFormed, "utf8")) out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return `'${out}'`;
}

/**
 * The catalogue of errors: every errorCode a client can see, with its status and title. Titles are
 * docs/contract.md §10's; so are the codes. The factories below and the OpenAPI
 * document's error list (services/gateway/src/openapi/document.ts) are both derived from it.
 */
export const ERROR_CATALOGUE = {
  INVALID_PARAMETER: { status: 400, title: "Invalid parameter" },
  INVALID_CURSOR: { status: 400, title: "Invalid cursor" },
  MISSING_PARAMETER: { status: 400, title: "Missing required parameter" },
  BAD_REQUEST: { status: 400, title: "Bad Request" },
  REQUEST_TIMEOUT: { status: 408, title: "Request Timeout" },
  HTTP_VERSION_NOT_SUPPORTED: { status: 400, title: "HTTP version not supported" },
  REQUEST_HEADER_FIELDS_TOO_LARGE: { status: 431, title: "Request Header Fields Too Large" },
  DELETIONS_CURSOR_EXPIRED: { status: 410, title: "Deletions cursor expired" },
  REWRITES_CURSOR_EXPIRED: { status: 400, title: "Rewrites cursor expired" },
  UNAUTHORIZED: { status: 401, title: "Unauthorized" },
  ORGANIZATION_NOT_CONFIGURED: { status: 404, title: "Organization not configured" },
  DATASET_NOT_FOUND: { status: 404, title: "Dataset not found" },
  NOT_FOUND: { status: 404, title: "Not Found" },
  METHOD_NOT_ALLOWED: { status: 405, title: "Method Not Allowed" },
  RATE_LIMITED: { status: 429, title: "Too Many Requests" },
  INTERNAL_ERROR: { status: 500, title: "Internal Server Error" },
  DATASET_NOT_EXPORTABLE: { status: 503, title: "Dataset cannot be exported" },
  AUTH_UNAVAILABLE: { status: 503, title: "Authentication temporarily unavailable" },
  DATABASE_UNAVAILABLE: { status: 503, title: "Database unavailable" },
} as const satisfies Record<string, { status: number; title: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An AppError of the catalogue: status and title come from its entry. */
const catalogued = (errorCode: ErrorCode, fields: Omit<ProblemFields, "status" | "errorCode" | "title"> = {}) =>
  new AppError({ status: ERROR_CATALOGUE[errorCode].status, errorCode, title: ERROR_CATALOGUE[errorCode].title, ...fields });

export const Errors = {
  invalidParameter: (errors: Record<string, string[]>, detail?: string) =>
    catalogued("INVALID_PARAMETER", { detail: detail ?? Object.values(errors).flat().join("; "), errors }),
  invalidCursor: (detail: string) => catalogued("INVALID_CURSOR", { detail }),
  /** A deletions cursor positioned before tombstones that retention has since pruned (docs/api.md, deletions). */
  deletionsCursorExpired: (key: string) =>
    catalogued("DELETIONS_CURSOR_EXPIRED", {
      detail: `Deletions after this cursor of dataset '${key}' are older than the retention and have been pruned. Re-read the dataset in full, then restart its deletion feed without a cursor.`,
    }),
  /** A rewrites cursor positioned before rewrite entries that retention has since pruned (docs/api.md, rewrites). */
  rewritesCursorExpired: (key: string) =>
    catalogued("REWRITES_CURSOR_EXPIRED", {
      detail: `Rewrites after this cursor of dataset '${key}' are older than the retention and have been pruned. Re-read the dataset in full, then restart its rewrite feed without a cursor.`,
    }),
  missingParameter: (name: string, detail: string) => catalogued("MISSING_PARAMETER", { detail, errors: { [name]: [detail] } }),
  /**
   * RFC 6750: the challenge names the scheme; `invalidToken` when a credential was sent and refused
   * (a missing one gets the bare challenge). The body never explains (the contract's 401).
   */
  unauthorized: (invalidToken = false) =>
    catalogued("UNAUTHORIZED", {
      headers: { "WWW-Authenticate": `Bearer realm="dataset-export"${invalidToken ? ', error="invalid_token"' : ""}` },
    }),
  organizationNotConfigured: () =>
    catalogued("ORGANIZATION_NOT_CONFIGURED", { detail: "The organization of this API key is not enabled for export. Contact support." }),
  datasetNotFound: (key: string) =>
    catalogued("DATASET_NOT_FOUND", { detail: `No dataset ${quoteInput(key)} exists. Re-read the listing at /v1/datasets.` }),
  /** The HTTP request itself could not be parsed (answered before any route is involved). */
  badRequest: (detail = "The HTTP request could not be parsed.") => catalogued("BAD_REQUEST", { detail }),
  /** The client did not finish sending its request's header section in time (answered before routing). */
  requestTimeout: () => catalogued("REQUEST_TIMEOUT", { detail: "The request's header section did not arrive in time." }),
  headersTooLarge: () =>
    catalogued("REQUEST_HEADER_FIELDS_TOO_LARGE", { detail: "The request's header section is larger than the server accepts." }),
  /**
   * A streamed page over HTTP/1.0 has neither a length nor chunked framing, so a cut page would read
   * as a complete one: refused (400, not 505: it is the caller's to fix, and 5xx would be retried).
   */
  httpVersionNotSupported: (version: string) =>
    catalogued("HTTP_VERSION_NOT_SUPPORTED", {
      detail: `CSV pages are only served over HTTP/1.1 or later (this request arrived as ${version}): over HTTP/1.0 an aborted page could not be told from a complete one.`,
    }),
  routeNotFound: () => catalogued("NOT_FOUND", { detail: "No endpoint matches this path." }),
  methodNotAllowed: (allow: string[]) =>
    catalogued("METHOD_NOT_ALLOWED", { detail: `Allowed methods: ${allow.join(", ")}.`, headers: { Allow: allow.join(", ") } }),
  rateLimited: (fields: { limit: number; retryAfter: number; reset: number; detail: string }) =>
    catalogued("RATE_LIMITED", {
      detail: fields.detail,
      retryAfter: fields.retryAfter,
      omitTraceId: true,
      headers: {
        "RateLimit-Limit": String(fields.limit),
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": String(fields.reset),
      },
    }),
  internal: () => catalogued("INTERNAL_ERROR", { detail: "An unexpected error occurred. Quote the traceId when contacting support." }),
  datasetNotExportable: (detail: string) => catalogued("DATASET_NOT_EXPORTABLE", { detail }),
  authUnavailable: (retryAfter = 5) =>
    catalogued("AUTH_UNAVAILABLE", {
      detail: "The key store did not answer; the key itself is fine. Retry after the indicated delay.",
      retryAfter,
    }),
  databaseUnavailable: (detail = "A database operation failed. Retry with exponential backoff.") => catalogued("DATABASE_UNAVAILABLE", { detail }),
};
