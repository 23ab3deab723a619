import { Errors, isUuid } from "@exportsvc/common";
import { hasCompletedAt, hasRowIndex, InvalidLiteralError, LIMITS, timestamptzLiteral, type PageDataset } from "@exportsvc/datasets";
import type { ExportCsvRequest, ExportDeletionsRequest } from "@exportsvc/proto";

/** docs/contract.md: `limit` is 1 to the public page size, default the page size, never reduced. */
export const MAX_LIMIT = LIMITS.pageSize;
export const DEFAULT_LIMIT = LIMITS.pageSize;
/** row_index is an int4; a larger afterRowIndex means "after every row of that submission". */
const MAX_ROW_INDEX = 2_147_483_647;

/** The request's checked paging parameters, before the cursor (if any) is verified. */
export interface CheckedParameters {
  limit: number;
  cursor?: string;
  /** modifiedSince/after[/afterRowIndex]: strictly after this position. */
  original?: { lastModifiedMicros: bigint; id: string; rowIndex: number };
  completedFromMicros?: bigint;
  completedToMicros?: bigint;
}

const present = <T>(v: T | undefined | null): v is T => v !== undefined && v !== null;

/**
 * The parameter checks of the error table of docs/contract.md §10, in its order (the dataset has already been
 * found and is exportable). Unparsable values never get here: the gateway rejects them first.
 */
export function checkParameters(request: ExportCsvRequest, dataset: PageDataset): CheckedParameters {
  const limit = checkLimit(request);

  const hasModifiedSince = present(request.modifiedSinceMicros);
  const hasAfter = present(request.after);
  const hasAfterRowIndex = present(request.afterRowIndex);
  if (present(request.cursor) && (hasModifiedSince || hasAfter || hasAfterRowIndex)) {
    throw Errors.invalidCursor("cursor cannot be combined with modifiedSince, after or afterRowIndex. Send either the cursor alone or the original parameters.");
  }
  if (hasModifiedSince !== hasAfter) {
    throw Errors.invalidCursor("modifiedSince and after must be sent together (last_modified and id of the last row of the previous page).");
  }
  if (hasAfterRowIndex && !hasAfter) {
    throw Errors.invalidCursor("afterRowIndex can only be sent together with modifiedSince and after.");
  }
  const grid = hasRowIndex(dataset);
  if (hasAfterRowIndex && !grid) {
    throw Errors.invalidParameter({ afterRowIndex: [`Dataset '${dataset.key}' has no row_index column; afterRowIndex does not apply.`] });
  }
  if (hasAfterRowIndex && request.afterRowIndex! < 1n) {
    throw Errors.invalidParameter({ afterRowIndex: ["afterRowIndex must be at least 1."] });
  }
  if (grid && hasAfter && !hasAfterRowIndex) {
    throw Errors.missingParameter("afterRowIndex", `Dataset '${dataset.key}' is a grid dataset: page it with modifiedSince, after and afterRowIndex (row_index of the last row).`);
  }
  const hasFrom = present(request.fromMicros);
  const hasTo = present(request.toMicros);
  if ((hasFrom || hasTo) && !hasCompletedAt(dataset)) {
    const message = `Dataset '${dataset.key}' has no completed_at; from and to apply to form datasets only.`;
    throw Errors.invalidParameter({ ...(hasFrom ? { from: [message] } : {}), ...(hasTo ? { to: [message] } : {}) });
  }

  const checked: CheckedParameters = { limit };
  if (present(request.cursor)) checked.cursor = request.cursor;
  if (hasAfter) {
    // The gateway already rejects a non-uuid `after`; this guards the literal all the same.
    if (!isUuid(request.after!)) throw Errors.invalidParameter({ after: ["after must be the id (uuid) of the last row of the previous page."] });
    requireTimestamp("modifiedSince", request.modifiedSinceMicros!);
    const rowIndex = hasAfterRowIndex ? Number(request.afterRowIndex! > BigInt(MAX_ROW_INDEX) ? BigInt(MAX_ROW_INDEX) : request.afterRowIndex!) : 0;
    checked.original = { lastModifiedMicros: request.modifiedSinceMicros!, id: request.after!, rowIndex };
  }
  if (hasFrom) checked.completedFromMicros = requireTimestamp("from", request.fromMicros!);
  if (hasTo) checked.completedToMicros = requireTimestamp("to", request.toMicros!);
  return checked;
}

/** `limit`: 1 to MAX_LIMIT, default DEFAULT_LIMIT; a larger value is rejected, never reduced. */
function checkLimit(request: { limit?: number }): number {
  const limit = present(request.limit) ? request.limit : DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw Errors.invalidParameter({ limit: [`limit must be between 1 and ${MAX_LIMIT}; a larger value is rejected, never reduced.`] });
  }
  return limit;
}

/** The deletion and rewrite feeds' parameters: `limit` and `cursor`, with the CSV endpoint's rules. */
export function checkDeletionsParameters(request: Pick<ExportDeletionsRequest, "limit" | "cursor">): { limit: number; cursor?: string } {
  const limit = checkLimit(request);
  return present(request.cursor) ? { limit, cursor: request.cursor } : { limit };
}

/** A timestamp PostgreSQL cannot represent (beyond year 9999) is an invalid parameter, not a 500. */
function requireTimestamp(name: string, micros: bigint): bigint {
  try {
    timestamptzLiteral(micros);
    return micros;
  } catch (err) {
    if (err instanceof InvalidLiteralError) throw Errors.invalidParameter({ [name]: [`${name} is out of the supported range.`] });
    throw err;
  }
}
