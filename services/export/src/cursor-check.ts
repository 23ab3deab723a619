import type { Pool } from "pg";
import { AppError, Errors } from "@exportsvc/common";
import type { CursorBinding, CursorCodec, CursorPosition, CursorProblem, PageDataset } from "@exportsvc/datasets";

const DETAILS: Record<CursorProblem, string> = {
  empty: "The cursor parameter is empty. Omit cursor to start from the first page.",
  not_a_cursor: "The cursor is not an export cursor. Send the _cursor value of a row exactly as received, URL-encoded ('+' as %2B).",
  truncated: "The cursor is truncated. Send the whole _cursor value, including trailing '=' characters.",
  altered: "The cursor has been altered. Send the _cursor value of a row exactly as received.",
  retired_version: "The cursor was issued by a cursor version that is no longer read. Restart this dataset from the first page.",
  unknown_signing_key: "The cursor was signed with a key that is no longer accepted. Restart this dataset from the first page.",
  other_dataset: "The cursor was issued for a different dataset. Use a cursor from this dataset, or restart it from the first page.",
  reshaped_dataset:
    "The dataset was regenerated with a different row shape since the cursor was issued. Re-read the listing and restart this dataset from the first page.",
};

/** INVALID_CURSOR with a machine-readable `cursorProblem` member telling the cases apart. */
export function invalidCursor(problem: CursorProblem): AppError {
  const base = Errors.invalidCursor(DETAILS[problem]).toFields();
  return new AppError({ ...base, extensions: { ...(base.extensions ?? {}), cursorProblem: problem } });
}

/**
 * Every (dataset key, row shape) a cursor of this organization may have been issued for. Only this
 * organization's: a cursor of another organization verifies for none of them and is reported as
 * altered, so the answer never reveals that some other organization has a dataset of that key.
 */
async function knownBindings(pool: Pool, organizationId: string): Promise<Array<CursorBinding & { current: boolean }>> {
  const { rows } = await pool.query<{ key: string; shape_fingerprint: string; current: boolean }>(
    `SELECT key, shape_fingerprint, true AS current FROM dataset_registry WHERE organization_id = $1
     UNION ALL
     SELECT dataset_key, shape_fingerprint, false FROM dataset_shape_history WHERE organization_id = $1`,
    [organizationId],
  );
  return rows.map((r) => ({ organizationId, datasetKey: r.key, shapeFingerprint: r.shape_fingerprint, current: r.current }));
}

/**
 * Verifies a cursor for this dataset and returns its position. When the MAC does not match, the
 * organization's other datasets and earlier row shapes are tried (failure path only) to tell
 * "other dataset" and "reshaped" apart from "altered".
 */
export async function resolveCursor(
  pool: Pool,
  codec: CursorCodec,
  organizationId: string,
  dataset: PageDataset,
  text: string,
): Promise<CursorPosition> {
  const parsed = codec.parse(text);
  if (!parsed.ok) throw invalidCursor(parsed.problem);
  const binding: CursorBinding = { organizationId, datasetKey: dataset.key, shapeFingerprint: dataset.shapeFingerprint };
  if (codec.verify(parsed.cursor, binding)) return parsed.cursor.position;

  const candidates = await knownBindings(pool, organizationId);
  const match = candidates.find((c) => codec.verify(parsed.cursor, c));
  if (!match) throw invalidCursor("altered");
  throw invalidCursor(match.datasetKey === dataset.key ? "reshaped_dataset" : "other_dataset");
}
