/**
 * Failures an operator can fix (bad input, unknown ids). The CLI prints their message without a
 * stack trace and exits non-zero; anything else is a bug or an infrastructure failure.
 */
export type ExportctlErrorCode =
  | "INVALID_DOCUMENT"
  | "UNKNOWN_REFERENCE"
  | "NOT_FOUND"
  | "INVALID_ARGUMENT"
  | "CONFIGURATION"
  | "KEY_HASH_SECRET_MISMATCH"
  | "KEYS_ACTIVE"
  | "DATABASE_NOT_FOUND"
  | "DATABASE_NOT_MIGRATED"
  | "DATABASE_ACCESS_DENIED";

export class ExportctlError extends Error {
  constructor(
    readonly code: ExportctlErrorCode,
    message: string,
    /** One line per problem, each naming its place in the input (e.g. `suppliers[3].products[1]`). */
    readonly problems: string[] = [],
  ) {
    super(problems.length > 0 ? `${message}\n${problems.map((p) => `  - ${p}`).join("\n")}` : message);
    this.name = "ExportctlError";
  }
}

export const isExportctlError = (e: unknown): e is ExportctlError => e instanceof ExportctlError;
