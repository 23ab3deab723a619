import type { CursorCodec } from "@exportsvc/datasets";
import type { Client } from "pg";
import type { PreviousDataset } from "./derive";

export type BuildStatus =
  /** Every dataset of the form was rebuilt and swapped in. */
  | "built"
  /** The rebuild failed; the previous tables still hold their data, the registry rows are `failed`. */
  | "failed"
  /** The form is deleted: its datasets stay exactly as they are. */
  | "frozen"
  /** The form has no published version yet: nothing to build. */
  | "unpublished"
  /** No such form in this organization. */
  | "missing";

export interface BuildResult {
  status: BuildStatus;
  /** Dataset keys of the form after the build (submission first), when built or failed. */
  datasets: string[];
  /** Keys retired by this build (form or grid renamed). */
  retired: string[];
  error?: string;
}

/** A registry row of the form as the rebuild reads it. */
export interface RegistryRow extends PreviousDataset {
  tableName: string | null;
}

export interface BuildOptions {
  /**
   * How long a replaced table outlives the swap before it is dropped (default 60 s): an export that
   * resolved the old table just before the swap still reads it. Tables past their grace are dropped
   * by any later build or maintenance pass.
   */
  dropGraceMs?: number;
}

export interface RebuildOptions {
  /**
   * How many of the form's tables are rendered at once (default 3, at most the number of tables): the rebuild's own connection
   * plus `parallelism - 1` helper connections opened for the rebuild (not taken from the pool, so
   * a busy pool cannot deadlock it). 1 renders every table in the rebuild's transaction.
   */
  parallelism?: number;
  /** Opens a helper connection (default: a new client with the pool's settings). */
  openHelper?: () => Promise<Client>;
  /**
   * Signs each row's `_cursor` into the new tables (the export's CURSOR_KEYS; see stored-cursors.ts);
   * undefined: the tables store none and the export signs on every page.
   */
  cursorCodec?: CursorCodec;
}

export const DEFAULT_DROP_GRACE_MS = 60_000;
export const DEFAULT_REBUILD_PARALLELISM = 3;
