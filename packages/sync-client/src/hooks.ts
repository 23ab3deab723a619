/**
 * The one place where change feeds beyond the CSV cursor plug into the engine. The built-in ones
 * (src/feeds.ts) follow the API's deletion feed (`links.deletions`) and its rewrite signal
 * (`rewriteToken`); each keeps its own position in `state.extensions[<name>]`, which the engine
 * commits with the dataset's state.
 */
import type { ExportApiClient } from "./api/client";
import type { ListingEntry } from "./api/types";
import type { DatasetState } from "./state";
import type { TablePlan, Target } from "./targets/target";

export interface DatasetContext {
  entry: ListingEntry;
  /** The dataset's state; changes to `state.extensions` are committed when the dataset's sync ends. */
  state: DatasetState;
  plan: TablePlan;
  client: ExportApiClient;
  target: Target;
  /** Rows per request (the engine's --limit). */
  limit: number;
  signal?: AbortSignal;
}

/**
 * What an extension's afterPages asks of the engine: re-read the dataset in full now. Once per pass;
 * asked again by that full read, the dataset is reported failed and the next pass reads it in full.
 */
export interface AfterPagesResult {
  fullRead?: string;
  /** Stored rows this extension deleted. */
  deleted?: number;
}

export interface SyncExtension {
  name: string;
  /**
   * Before a dataset is synced: a reason to re-read it in full now (for example a rewrite marker
   * that moved), or undefined. A reason also makes a dataset whose changeToken did not move sync.
   */
  fullReadReason?(entry: ListingEntry, state: DatasetState): string | undefined;
  /** A full read starts (not when one is resumed): record what it starts from in `state.extensions`. */
  onFullReadStart?(entry: ListingEntry, state: DatasetState): void;
  /** After the dataset's last page, before the finishing transaction (apply tombstones here). */
  afterPages?(ctx: DatasetContext): Promise<AfterPagesResult | void>;
  /** The finishing transaction is about to commit `state`: promote what a full read recorded at its start. */
  beforeFinish?(entry: ListingEntry, state: DatasetState, wasFull: boolean): void;
}
