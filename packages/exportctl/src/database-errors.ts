import type { ExportctlErrorCode } from "./errors";

/** The database name in DATABASE_URL, for messages (never the password). */
function databaseName(): string {
  try {
    return decodeURIComponent(new URL(process.env.DATABASE_URL ?? "").pathname.replace(/^\//, "")) || "(default)";
  } catch {
    return "(unparsable)";
  }
}

/**
 * Database failures an operator fixes by correcting DATABASE_URL or migrating: a message and exit 1,
 * not "unexpected failure" with a stack trace. Looks through wrappers (MikroORM keeps the driver's
 * error as `cause` or copies its `code`).
 */
export function describeDatabaseFailure(err: unknown): { code: ExportctlErrorCode; message: string } | undefined {
  for (let e = err as { code?: unknown; message?: string; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    switch (e.code) {
      case "3D000":
        return { code: "DATABASE_NOT_FOUND", message: `database '${databaseName()}' does not exist on that server; check DATABASE_URL (then run: exportctl migrate)` };
      case "28P01":
      case "28000":
        return { code: "DATABASE_ACCESS_DENIED", message: `the database server refused the credentials in DATABASE_URL: ${e.message}` };
      case "42P01":
      case "42703":
      case "3F000":
      case "42883":
        return {
          code: "DATABASE_NOT_MIGRATED",
          message: `the database '${databaseName()}' lacks tables or columns this exportctl needs (${e.message}); run: exportctl migrate`,
        };
    }
  }
  return undefined;
}
