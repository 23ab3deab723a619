import type { Pool } from "pg";
import { AppError, Errors } from "@exportsvc/common";
import { deletionsShape, loadKnownShapes, rewritesShape, rowShape, type CursorBinding, type CursorCodec, type CursorPosition, type CursorProblem, type DatasetKind, type PageDataset } from "@exportsvc/datasets";

const DETAILS: Record<CursorProblem, string> = {
  empty: "The cursor parameter is empty. Omit cursor to start from the first page.",
  not_a_cursor: "The cursor is not an export cursor. Send the _cursor value of a row exactly as received, URL-encoded ('+' as %2B).",
  truncated: "The cursor is truncated. Send the whole _cursor value, including trailing '=' characters.",
  altered: "The cursor has been altered. Send the _cursor value of a row exactly as received.",
  retired_version: "The cursor was issued by a cursor version that is no longer read. Restart this dataset from the first page.",
  unknown_signing_key: "The cursor was signed with a key that is no longer accepted. Restart this dataset from the first page.",
  other_dataset: "The cursor was issued for a different dataset. Use a cursor from this dataset, or restart it from the first page.",
  other_feed:
    "The cursor was issued by another feed of this dataset: the CSV endpoint, the deletion feed and the rewrite feed each take only their own cursors.",
  reshaped_dataset:
    "The dataset was regenerated with a different row shape since the cursor was issued. Re-read the listing and restart this dataset from the first page.",
};

/** INVALID_CURSOR with a machine-readable `cursorProblem` member telling the cases apart. */
export function invalidCursor(problem: CursorProblem): AppError {
  const base = Errors.invalidCursor(DETAILS[problem]).toFields();
  return new AppError({ ...base, extensions: { ...(base.extensions ?? {}), cursorProblem: problem } });
}

/** The paged feeds of a dataset: its rows (CSV endpoint), its deletion feed and its rewrite feed. */
export type Feed = "rows" | "deletions" | "rewrites";

const SHAPES: Record<Feed, (dataset: { kind: DatasetKind; sourceRef: string }) => string> = { rows: rowShape, deletions: deletionsShape, rewrites: rewritesShape };
const shapeOf = (dataset: { kind: DatasetKind; sourceRef: string }, feed: Feed) => SHAPES[feed](dataset);

interface KnownBinding extends CursorBinding {
  feed: Feed;
  /** The binding is a column fingerprint: how CSV cursors issued before row shapes were signed. */
  legacy: boolean;
}

/**
 * Every binding a cursor of this organization may have been issued under: each dataset key's row
 * shape and deletions shape (current and retired registry rows) and, for CSV cursors issued before
 * row shapes existed, every column fingerprint the key has had. Only this organization's: a cursor of
 * another organization verifies for none of them and is reported as altered, so the answer never
 * reveals that some other organization has a dataset of that key.
 */
async function knownBindings(pool: Pool, organizationId: string): Promise<KnownBinding[]> {
  const { rows, history } = await loadKnownShapes(pool, organizationId);
  const shapes = (feed: Feed) =>
    rows.flatMap((r) => {
      try {
        return [{ organizationId, datasetKey: r.key, rowShape: shapeOf({ kind: r.kind, sourceRef: r.source_ref }, feed), feed, legacy: false }];
      } catch {
        return []; // a registry row no feed can be derived for issued no cursors of that feed
      }
    });
  return [
    ...shapes("rows"),
    ...shapes("deletions"),
    ...shapes("rewrites"),
    ...rows.map((r) => ({ organizationId, datasetKey: r.key, rowShape: r.shape_fingerprint, feed: "rows" as const, legacy: true })),
    ...history.map((r) => ({ organizationId, datasetKey: r.dataset_key, rowShape: r.shape_fingerprint, feed: "rows" as const, legacy: true })),
  ];
}

/** The binding of cursors this dataset's feed issues now. */
export const currentBinding = (organizationId: string, dataset: PageDataset, feed: Feed = "rows"): CursorBinding => ({
  organizationId,
  datasetKey: dataset.key,
  rowShape: shapeOf(dataset, feed),
});

/**
 * Verifies a cursor for this dataset's feed and returns its position. A CSV cursor is bound to the
 * dataset's row shape (docs/cursor.md), so it survives columns being added, removed, retyped or
 * relabelled; a deletions cursor to the deletion feed. When the MAC does not match (failure path
 * only), the organization's known bindings are tried:
 * - this key's CSV feed under one of its column fingerprints: a cursor issued before cursors were
 *   bound to row shapes (or by a replica of that release during a rolling upgrade). The key's row
 *   shape has never changed (a key keeps its kind and source for life), so its position means what
 *   it meant: accepted on the CSV endpoint;
 * - this key's other feed: `other_feed`;
 * - this key under another shape: `reshaped_dataset` (kept for a future change of the row-shape
 *   definition; today a change of paging meaning always comes with a new key);
 * - another key of the organization: `other_dataset`; nothing: `altered`.
 */
export async function resolveCursor(
  pool: Pool,
  codec: CursorCodec,
  organizationId: string,
  dataset: PageDataset,
  text: string,
  feed: Feed = "rows",
): Promise<CursorPosition> {
  const parsed = codec.parse(text);
  if (!parsed.ok) throw invalidCursor(parsed.problem);
  if (codec.verify(parsed.cursor, currentBinding(organizationId, dataset, feed))) return parsed.cursor.position;

  const candidates = await knownBindings(pool, organizationId);
  const match = candidates.find((c) => codec.verify(parsed.cursor, c));
  if (!match) throw invalidCursor("altered");
  if (match.datasetKey !== dataset.key) throw invalidCursor("other_dataset");
  if (match.feed !== feed) throw invalidCursor("other_feed");
  if (match.legacy) return parsed.cursor.position;
  throw invalidCursor("reshaped_dataset");
}

/**
 * Where a page of a change feed (deletions, rewrites) resumes: after the cursor's position, unless
 * the feed's log was pruned past it, which expires the cursor; undefined without a cursor (the
 * feed's start).
 */
export async function resumeChangeFeed(
  pool: Pool,
  codec: CursorCodec,
  organizationId: string,
  dataset: PageDataset,
  text: string | undefined,
  feed: Exclude<Feed, "rows">,
  expiry: { prunedPast(position: CursorPosition): Promise<boolean>; expired(): AppError },
): Promise<CursorPosition | undefined> {
  if (text === undefined) return undefined;
  const position = await resolveCursor(pool, codec, organizationId, dataset, text, feed);
  if (await expiry.prunedPast(position)) throw expiry.expired();
  return position;
}
