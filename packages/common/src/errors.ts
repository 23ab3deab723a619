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

/** The catalogue of errors. Titles are the spec's; codes are the spec's and decisions.md's. */
export const Errors = {
  invalidParameter: (errors: Record<string, string[]>, detail?: string) =>
    new AppError({
      status: 400,
      errorCode: "INVALID_PARAMETER",
      title: "Invalid parameter",
      detail: detail ?? Object.values(errors).flat().join("; "),
      errors,
    }),
  invalidCursor: (detail: string) =>
    new AppError({ status: 400, errorCode: "INVALID_CURSOR", title: "Invalid cursor", detail }),
  missingParameter: (name: string, detail: string) =>
    new AppError({
      status: 400,
      errorCode: "MISSING_PARAMETER",
      title: "Missing required parameter",
      detail,
      errors: { [name]: [detail] },
    }),
  unauthorized: () => new AppError({ status: 401, errorCode: "UNAUTHORIZED", title: "Unauthorized" }),
  organizationNotConfigured: () =>
    new AppError({
      status: 404,
      errorCode: "ORGANIZATION_NOT_CONFIGURED",
      title: "Organization not configured",
      detail: "The organization of this API key is not enabled for export. Contact support.",
    }),
  datasetNotFound: (key: string) =>
    new AppError({
      status: 404,
      errorCode: "DATASET_NOT_FOUND",
      title: "Dataset not found",
      detail: `No dataset '${key}' exists. Re-read the listing at /v1/datasets.`,
    }),
  /** The HTTP request itself could not be parsed (answered before any route is involved). */
  badRequest: () =>
    new AppError({ status: 400, errorCode: "BAD_REQUEST", title: "Bad Request", detail: "The HTTP request could not be parsed." }),
  headersTooLarge: () =>
    new AppError({
      status: 431,
      errorCode: "REQUEST_HEADER_FIELDS_TOO_LARGE",
      title: "Request Header Fields Too Large",
      detail: "The request's header section is larger than the server accepts.",
    }),
  routeNotFound: () =>
    new AppError({ status: 404, errorCode: "NOT_FOUND", title: "Not Found", detail: "No endpoint matches this path." }),
  methodNotAllowed: (allow: string[]) =>
    new AppError({
      status: 405,
      errorCode: "METHOD_NOT_ALLOWED",
      title: "Method Not Allowed",
      detail: `Allowed methods: ${allow.join(", ")}.`,
      headers: { Allow: allow.join(", ") },
    }),
  rateLimited: (fields: { limit: number; retryAfter: number; reset: number; detail: string }) =>
    new AppError({
      status: 429,
      errorCode: "RATE_LIMITED",
      title: "Too Many Requests",
      detail: fields.detail,
      retryAfter: fields.retryAfter,
      omitTraceId: true,
      headers: {
        "RateLimit-Limit": String(fields.limit),
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": String(fields.reset),
      },
    }),
  internal: () =>
    new AppError({
      status: 500,
      errorCode: "INTERNAL_ERROR",
      title: "Internal Server Error",
      detail: "An unexpected error occurred. Quote the traceId when contacting support.",
    }),
  datasetNotExportable: (detail: string) =>
    new AppError({ status: 503, errorCode: "DATASET_NOT_EXPORTABLE", title: "Dataset cannot be exported", detail }),
  authUnavailable: (retryAfter = 5) =>
    new AppError({
      status: 503,
      errorCode: "AUTH_UNAVAILABLE",
      title: "Authentication temporarily unavailable",
      detail: "The key store did not answer; the key itself is fine. Retry after the indicated delay.",
      retryAfter,
    }),
  databaseUnavailable: (detail = "A database operation failed. Retry with exponential backoff.") =>
    new AppError({ status: 503, errorCode: "DATABASE_UNAVAILABLE", title: "Database unavailable", detail }),
};
