/**
 * The sync state, kept in the target database beside the copy and committed in the same
 * transaction as each page's rows. One document per dataset, plus the listing ETag.
 */
import type { ListingEntry } from "./api/types";

export interface DatasetState {
  key: string;
  /** The table holding the copy (named after the key). */
  table: string;
  /** Where the next page starts; null: from the beginning. */
  cursor: string | null;
  /** When `cursor` was last moved (ISO 8601). */
  cursorAt: string | null;
  /** changeToken of the last sync that reached the end of the dataset. */
  changeToken: string | null;
  /** changeToken the sync in progress started from; becomes `changeToken` when it ends. */
  pendingChangeToken: string | null;
  /** A sync was started and has not reached the end yet (a killed client resumes it). */
  inProgress: boolean;
  /** "full": reading from the beginning, then sweeping the rows it did not see. */
  phase: "incremental" | "full";
  /** Why the current full read was started. */
  fullReason: string | null;
  /**
   * The read in progress started from the beginning into an empty table and no page of it met a
   * stored key yet: its pages are appended (targets/target.ts, AppendRefused).
   */
  appending: boolean;
  /** Rows carry the generation that last wrote them; a full read sweeps older generations. */
  generation: number;
  fullReadStartedAt: string | null;
  lastFullReadAt: string | null;
  lastSyncedAt: string | null;
  /** Column types applied to the table (key → listing dataType). */
  columns: Record<string, string>;
  /** The listing entry last seen (kept for runs answered by a 304). */
  entry: ListingEntry | null;
  rowsUpserted: number;
  rowsDeleted: number;
  pages: number;
  lastError: { at: string; message: string; errorCode?: string; status?: number } | null;
  /** The key left the listing (or answered 404): the table stays, nothing reads into it any more. */
  retiredAt: string | null;
  /** State owned by sync extensions (a deletion-feed cursor, a rewriteToken), committed like the cursor. */
  extensions: Record<string, unknown>;
}

export interface SyncState {
  listingEtag: string | null;
  datasets: Map<string, DatasetState>;
}

export function newDatasetState(key: string, table: string): DatasetState {
  return {
    key,
    table,
    cursor: null,
    cursorAt: null,
    changeToken: null,
    pendingChangeToken: null,
    inProgress: false,
    phase: "full",
    fullReason: "first sync",
    appending: false,
    generation: 0,
    fullReadStartedAt: null,
    lastFullReadAt: null,
    lastSyncedAt: null,
    columns: {},
    entry: null,
    rowsUpserted: 0,
    rowsDeleted: 0,
    pages: 0,
    lastError: null,
    retiredAt: null,
    extensions: {},
  };
}

/** Reads a stored document, filling fields added by later versions of the client. */
export function reviveDatasetState(doc: Partial<DatasetState> & { key: string; table: string }): DatasetState {
  return { ...newDatasetState(doc.key, doc.table), ...doc };
}
