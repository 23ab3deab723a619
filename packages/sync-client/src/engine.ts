/**
 * The sync engine: the loader rules of docs/contract.md §4 on top of the API client and a target.
 *
 * Per run: one listing request (If-None-Match with the stored ETag; a 304 ends the run), then the
 * datasets one after another (or `concurrency` at once): skip those whose changeToken did not move,
 * page the others from their stored cursor, each page's rows and state in one transaction, and end
 * each dataset with one transaction that trims renumbered grid rows, sweeps what a full read did
 * not see and records the new changeToken. Between the two, the built-in extensions (src/feeds.ts)
 * apply the dataset's deletion feed; a moved rewriteToken or an expired deletions cursor makes the
 * dataset's sync a full read.
 */
import { ExportApiClient, sleep, type PageResponse } from "./api/client";
import { ApiError, StreamAbortedError, isApiError } from "./api/errors";
import { backoffDelay } from "./api/retry";
import { CURSOR_COLUMN, isGridDataset, type ListingEntry } from "./api/types";
import { readCsvPage, recordsCounted, splitCsvPage } from "./csv";
import { notListedMessage } from "./dataset-keys";
import { planForHeader } from "./page-plan";
import { builtinExtensions } from "./feeds";
import type { SyncExtension } from "./hooks";
import { newDatasetState, type DatasetState, type SyncState } from "./state";
import { AppendRefused, type TablePlan, type Target } from "./targets/target";

export interface SyncOptions {
  /** Rows per CSV call (1..5000). */
  limit?: number;
  /** Datasets synced at once (each holds one request in flight). */
  concurrency?: number;
  /** Re-read every dataset in full and sweep deletions this often. */
  fullEveryMs?: number;
  /** Only these dataset keys (default: all). */
  only?: string[];
  /** Stop between pages (the page in progress is finished and committed). */
  signal?: AbortSignal;
  onEvent?: (event: SyncEvent) => void;
  /** Run after the built-in ones (deletion feed, rewrite signal). */
  extensions?: SyncExtension[];
  now?: () => Date;
}

export type SyncEvent =
  | { event: "listing"; status: 200 | 304; datasets?: number }
  | { event: "dataset-start"; dataset: string; mode: "incremental" | "full" | "resume"; reason?: string }
  | { event: "page"; dataset: string; rows: number; totalRows: number; bytes: number; rowsPerSecond: number }
  | { event: "page-retry"; dataset: string; attempt: number; delayMs: number; message: string }
  | { event: "dataset-done"; dataset: string; rows: number; pages: number; trimmed: number; swept: number; tombstoned: number; seconds: number; rowsPerSecond: number }
  | { event: "dataset-skip"; dataset: string; reason: string }
  | { event: "dataset-error"; dataset: string; message: string; errorCode?: string; status?: number }
  | { event: "dataset-retired"; dataset: string }
  | { event: "full-read"; dataset: string; reason: string };

export interface RunSummary {
  listing: "modified" | "not-modified";
  synced: string[];
  skipped: string[];
  failed: Array<{ dataset: string; message: string; errorCode?: string }>;
  retired: string[];
  rows: number;
  deleted: number;
  stopped: boolean;
  seconds: number;
}

const DAY_MS = 24 * 3600_000;

/** An error that is a defect of this program rather than a failure of the API, the copy or the data. */
const isDefect = (err: unknown) => !(err instanceof Error) || err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError || err instanceof SyntaxError;

/** An extension asked for a full read again during the full read it asked for: the next pass makes it. */
class FullReadDeferred extends Error {
  constructor(reason: string) {
    super(`${reason}; asked again during this pass's full read, so the next pass reads the dataset in full`);
    this.name = "FullReadDeferred";
  }
}
type Outcome = "synced" | "skipped" | "not-found" | "failed" | "stopped";

export class SyncEngine {
  private readonly limit: number;
  private readonly concurrency: number;
  private readonly fullEveryMs: number;
  private readonly now: () => Date;
  private readonly extensions: SyncExtension[];
  /** The last listing read, by key (grid datasets are trimmed against their root dataset). */
  private listed = new Map<string, ListingEntry>();
  /**
   * Per dataset, the next page's request, opened as soon as a full page's last cursor is known: the
   * server prepares it while the target writes the page (flow control holds back the body's bytes
   * until it is read, so memory stays one page). Used only by a read from that very cursor;
   * otherwise (a failed page, a stop) discarded.
   */
  private prefetched = new Map<string, { cursor: string | null; response: Promise<PageResponse> }>();

  constructor(
    private readonly client: ExportApiClient,
    private readonly target: Target,
    private readonly opts: SyncOptions = {},
  ) {
    this.limit = opts.limit ?? 5000;
    if (!Number.isInteger(this.limit) || this.limit < 1 || this.limit > 5000) throw new Error("limit must be an integer from 1 to 5000");
    this.concurrency = Math.max(1, Math.min(opts.concurrency ?? 1, target.maxConcurrency));
    this.fullEveryMs = opts.fullEveryMs ?? DAY_MS;
    this.now = opts.now ?? (() => new Date());
    this.extensions = [...builtinExtensions(), ...(opts.extensions ?? [])];
  }

  private emit(event: SyncEvent) {
    this.opts.onEvent?.(event);
  }

  private get stopping() {
    return this.opts.signal?.aborted === true;
  }

  /** One pass: listing, then every dataset that moved. */
  async runOnce(): Promise<RunSummary> {
    const started = Date.now();
    const summary: RunSummary = { listing: "modified", synced: [], skipped: [], failed: [], retired: [], rows: 0, deleted: 0, stopped: false, seconds: 0 };
    const state = await this.target.loadState();
    const wanted = (key: string) => !this.opts.only || this.opts.only.includes(key);
    // A 304 may only end the run when nothing is left half-done, failed or due.
    const pending = [...state.datasets.values()].some(
      (d) => wanted(d.key) && !d.retiredAt && (d.inProgress || d.lastError || this.fullReadDue(d) || this.extensionReason(d.entry, d)),
    );
    const listing = await this.client.listing(pending || this.opts.only ? undefined : state.listingEtag ?? undefined);
    if (listing.notModified) {
      this.emit({ event: "listing", status: 304 });
      summary.listing = "not-modified";
      summary.seconds = (Date.now() - started) / 1000;
      return summary;
    }
    this.emit({ event: "listing", status: 200, datasets: listing.datasets.length });
    this.listed = new Map(listing.datasets.map((e) => [e.key, e]));
    let entries = listing.datasets.filter((e) => wanted(e.key));
    await this.retireMissing(state, listing.datasets, summary);
    for (const key of this.opts.only ?? []) {
      // A key asked for that is neither listed nor a dataset this copy ever held (those are retired above).
      if (this.listed.has(key) || state.datasets.has(key)) continue;
      const message = notListedMessage(key, this.listed.keys());
      summary.failed.push({ dataset: key, message, errorCode: "DATASET_NOT_LISTED" });
      this.emit({ event: "dataset-error", dataset: key, message, errorCode: "DATASET_NOT_LISTED" });
    }

    const done = new Set<string>();
    let notFound = await this.syncAll(state, entries, summary, done);
    // A key answering 404 while the listing answers was renamed: re-read the listing, retire the
    // old key, start the new one from page one. Bounded: the listing is re-read at most twice.
    for (let relist = 0; notFound.length && relist < 2 && !this.stopping; relist++) {
      const fresh = await this.client.listing();
      if (fresh.notModified) break;
      this.listed = new Map(fresh.datasets.map((e) => [e.key, e]));
      await this.retireMissing(state, fresh.datasets, summary);
      entries = fresh.datasets.filter((e) => wanted(e.key) && (!done.has(e.key) || notFound.includes(e.key)));
      notFound = await this.syncAll(state, entries, summary, done);
    }
    for (const key of notFound) {
      summary.failed.push({ dataset: key, message: "404 on export while still listed", errorCode: "DATASET_NOT_FOUND" });
    }
    summary.stopped = this.stopping;
    // The ETag is kept only when everything it describes is in the copy.
    if (!summary.stopped && summary.failed.length === 0 && !this.opts.only) await this.target.saveListingEtag(listing.etag ?? null);
    else await this.target.saveListingEtag(null);
    summary.seconds = (Date.now() - started) / 1000;
    return summary;
  }

  private fullReadDue(d: DatasetState): boolean {
    if (!d.lastFullReadAt) return true;
    return this.now().getTime() - Date.parse(d.lastFullReadAt) >= this.fullEveryMs;
  }

  private extensionReason(entry: ListingEntry | null, d: DatasetState): string | undefined {
    if (!entry) return undefined;
    for (const ext of this.extensions) {
      const reason = ext.fullReadReason?.(entry, d);
      if (reason) return `${ext.name}: ${reason}`;
    }
    return undefined;
  }

  private async retireMissing(state: SyncState, listed: ListingEntry[], summary: RunSummary) {
    const keys = new Set(listed.map((e) => e.key));
    for (const d of state.datasets.values()) {
      if (keys.has(d.key) || d.retiredAt) continue;
      if (this.opts.only && !this.opts.only.includes(d.key)) continue;
      d.retiredAt = this.now().toISOString();
      d.inProgress = false;
      await this.target.saveState(d);
      summary.retired.push(d.key);
      this.emit({ event: "dataset-retired", dataset: d.key });
    }
  }

  /**
   * Syncs `entries` with `concurrency` workers; returns the keys that answered 404. An error that
   * ends the run (an identity problem, a copy whose state cannot be saved) stops the workers from taking another
   * dataset, and is thrown only once every worker has finished the dataset in hand: nothing of this
   * run writes to the copy after it has returned, so a next run never races a page of this one.
   */
  private async syncAll(state: SyncState, entries: ListingEntry[], summary: RunSummary, done: Set<string>): Promise<string[]> {
    const queue = [...entries];
    const notFound: string[] = [];
    let failure: { error: unknown } | undefined;
    const worker = async () => {
      for (let entry = queue.shift(); entry && !this.stopping && !failure; entry = queue.shift()) {
        done.add(entry.key);
        let outcome: Outcome;
        try {
          outcome = await this.syncDataset(state, entry, summary);
        } catch (error) {
          failure ??= { error };
          return;
        } finally {
          this.discardPrefetch(entry.key);
        }
        if (outcome === "not-found") notFound.push(entry.key);
      }
    };
    await Promise.all(Array.from({ length: this.concurrency }, worker));
    if (failure) throw failure.error;
    return notFound;
  }

  private async syncDataset(state: SyncState, entry: ListingEntry, summary: RunSummary): Promise<Outcome> {
    let ds = state.datasets.get(entry.key) ?? newDatasetState(entry.key, entry.key);
    state.datasets.set(entry.key, ds);
    if (ds.retiredAt) ds = { ...ds, retiredAt: null };
    const extensionReason = this.extensionReason(entry, ds);
    const fullDue = this.fullReadDue(ds);
    if (!ds.inProgress && !ds.lastError && ds.changeToken === entry.changeToken && !fullDue && !extensionReason) {
      summary.skipped.push(entry.key);
      this.emit({ event: "dataset-skip", dataset: entry.key, reason: "changeToken did not move" });
      return "skipped";
    }
    const started = Date.now();
    let mode: "incremental" | "full" | "resume" = "incremental";
    if (ds.inProgress) mode = "resume";
    // No cursor after a completed full read: the dataset was empty, and reading it from the start is
    // incremental (a moved changeToken, e.g. a rename its rewrite feed answers, is no full read).
    else if (fullDue || extensionReason || (ds.cursor === null && !ds.lastFullReadAt)) {
      mode = "full";
      ds = this.startFullRead(ds, entry, ds.lastFullReadAt ? extensionReason ?? "scheduled full re-read" : "first sync");
    }
    ds = { ...ds, inProgress: true, pendingChangeToken: entry.changeToken, entry };
    state.datasets.set(entry.key, ds);
    this.emit({ event: "dataset-start", dataset: entry.key, mode, reason: ds.phase === "full" ? ds.fullReason ?? undefined : undefined });

    const plan = planTable(entry);
    // The first page is asked for while the copy's table is made ready: it needs nothing of it, and
    // a dataset's pass no longer waits for the two one after the other (syncAll discards it if unused).
    this.prefetch(entry, ds.cursor);
    let rows = 0;
    let pages = 0;
    let restartedForCursor = false;
    let restartedByExtension = false;
    let extensionDeleted = 0;
    try {
      ds.columns = await this.target.ensureTable(plan, ds.columns);
      // A read from the beginning into an empty table appends its pages (kept across a resume).
      if (ds.cursor === null && this.target.startAppend) {
        ds = { ...ds, appending: await this.target.startAppend(plan, ds.key) };
        state.datasets.set(entry.key, ds);
      }
      // Paging, then the extensions; at most one restart as a full read asked by an extension.
      for (;;) {
        for (;;) {
          if (this.stopping) {
            await this.target.saveState(ds);
            return "stopped";
          }
          let page: { rows: number; next: DatasetState };
          try {
            page = await this.readPage(entry, plan, ds, rows, started);
          } catch (err) {
            if (isApiError(err, 400, "INVALID_CURSOR") && ds.cursor !== null && !restartedForCursor) {
              // A stored cursor the server no longer reads (rebuilt dataset, new cursor version): re-read in full.
              restartedForCursor = true;
              ds = { ...this.startFullRead(ds, entry, "INVALID_CURSOR on the stored cursor"), inProgress: true, pendingChangeToken: entry.changeToken, entry };
              state.datasets.set(entry.key, ds);
              await this.target.saveState(ds);
              continue;
            }
            throw err;
          }
          ds = page.next;
          state.datasets.set(entry.key, ds);
          rows += page.rows;
          pages++;
          if (page.rows < this.limit) break;
        }
        // The rows are current: the extensions (the deletion feed) run; one may ask for a full read instead
        // (an expired deletions cursor), which restarts the dataset's paging once in this pass.
        let fullRead: string | undefined;
        for (const ext of this.extensions) {
          const result = await ext.afterPages?.({ entry, state: ds, plan, client: this.client, target: this.target, limit: this.limit, signal: this.opts.signal });
          extensionDeleted += result?.deleted ?? 0;
          if (result?.fullRead) {
            fullRead = `${ext.name}: ${result.fullRead}`;
            break;
          }
        }
        if (this.stopping) {
          await this.target.saveState(ds);
          return "stopped";
        }
        if (fullRead) {
          // Never finished as if current: what the extension could not apply would be lost until the
          // dataset's token moved again. Asked twice in one pass, the full read is left to the next pass.
          ds = { ...this.startFullRead(ds, entry, fullRead), inProgress: true, pendingChangeToken: entry.changeToken, entry };
          state.datasets.set(entry.key, ds);
          if (restartedByExtension) throw new FullReadDeferred(fullRead);
          restartedByExtension = true;
          await this.target.saveState(ds);
          continue;
        }
        break;
      }
      const finishedAt = this.now().toISOString();
      const wasFull = ds.phase === "full";
      const final: DatasetState = {
        ...ds,
        inProgress: false,
        appending: false,
        changeToken: entry.changeToken,
        pendingChangeToken: null,
        phase: "incremental",
        fullReason: null,
        lastSyncedAt: finishedAt,
        lastFullReadAt: wasFull ? ds.fullReadStartedAt ?? finishedAt : ds.lastFullReadAt,
        lastError: null,
        retiredAt: null,
      };
      for (const ext of this.extensions) ext.beforeFinish?.(entry, final, wasFull);
      const result = await this.target.finishDataset({ plan, state: final, sweepBelowGeneration: wasFull ? final.generation : null });
      state.datasets.set(entry.key, final);
      const emptied = await this.trimGrids(entry);
      summary.synced.push(entry.key);
      summary.rows += rows;
      summary.deleted += result.trimmed + result.swept + extensionDeleted + emptied;
      const seconds = (Date.now() - started) / 1000;
      this.emit({ event: "dataset-done", dataset: entry.key, rows, pages, trimmed: result.trimmed + emptied, swept: result.swept, tombstoned: extensionDeleted, seconds, rowsPerSecond: Math.round(rows / Math.max(seconds, 0.001)) });
      return "synced";
    } catch (err) {
      if (this.stopping && !(err instanceof ApiError)) return "stopped";
      if (isApiError(err, 404, "DATASET_NOT_FOUND")) return "not-found";
      // Identity and organization problems are nobody's dataset's fault: stop the run. So is a
      // defect of this program (a TypeError and its kind). Anything else is this dataset's failure,
      // the copy's included (a value its column refuses): recorded, and the other datasets go on.
      if (isApiError(err, 401) || isApiError(err, 404, "ORGANIZATION_NOT_CONFIGURED") || isDefect(err)) throw err;
      const message = (err as Error).message;
      const errorCode = err instanceof ApiError ? err.errorCode : undefined;
      ds = { ...ds, lastError: { at: this.now().toISOString(), message, errorCode, status: err instanceof ApiError ? err.status : undefined } };
      state.datasets.set(entry.key, ds);
      await this.target.saveState(ds);
      summary.failed.push({ dataset: entry.key, message, errorCode });
      this.emit({ event: "dataset-error", dataset: entry.key, message, errorCode, status: err instanceof ApiError ? err.status : undefined });
      return "failed";
    }
  }

  /**
   * Grid rows older than their submission's row in the root dataset are gone from the export (a grid
   * emptied by an edit is never re-served, so the per-page trimming cannot see it): after a grid
   * dataset, or a root dataset, syncs, such rows of the grid(s) below it are deleted.
   */
  private async trimGrids(entry: ListingEntry): Promise<number> {
    const rootOf = (e: ListingEntry): ListingEntry => {
      let cur = e;
      for (let hops = 0; cur.parentDataset && this.listed.has(cur.parentDataset) && hops < 16; hops++) cur = this.listed.get(cur.parentDataset)!;
      return cur;
    };
    const grids: ListingEntry[] = [];
    if (isGridDataset(entry) && entry.parentDataset) grids.push(entry);
    else {
      const below = (e: ListingEntry) => {
        for (const k of e.childDatasets ?? []) {
          const child = this.listed.get(k);
          if (child && grids.length < 256) {
            grids.push(child);
            below(child);
          }
        }
      };
      below(entry);
    }
    let deleted = 0;
    for (const grid of grids) {
      const root = rootOf(grid);
      if (root === grid || !("last_modified" in planTable(root).columns) || !("last_modified" in planTable(grid).columns)) continue;
      deleted += await this.target.trimObsoleteGridRows(grid.key, root.key);
    }
    return deleted;
  }

  private startFullRead(ds: DatasetState, entry: ListingEntry, reason: string): DatasetState {
    this.emit({ event: "full-read", dataset: ds.key, reason });
    const next: DatasetState = { ...ds, phase: "full", fullReason: reason, appending: false, generation: ds.generation + 1, cursor: null, fullReadStartedAt: this.now().toISOString(), extensions: { ...ds.extensions } };
    for (const ext of this.extensions) ext.onFullReadStart?.(entry, next);
    return next;
  }

  /**
   * One page in one transaction, from `ds.cursor`. A stream that does not end cleanly rolls the
   * page back and is retried from the same cursor (`pageAttempts`), then reported. A page the target
   * would not append (AppendRefused) is read again at once, upserted, and so is the rest of the read.
   */
  private async readPage(entry: ListingEntry, basePlan: TablePlan, ds: DatasetState, rowsSoFar: number, started: number) {
    const attempts = this.client.retry.pageAttempts;
    for (let attempt = 1; ; attempt++) {
      let res: PageResponse | undefined;
      try {
        res = await this.openPage(entry, ds.cursor);
        const raw = this.target.writeRawPage ? await splitCsvPage(res.body, res.request) : undefined;
        // A target that takes parsed rows: the body is read ahead of them and its records counted, so
        // the next page is asked for as soon as the body has ended, not once its rows are written.
        let counted: { rows: number; lastCursor: string | null } | undefined;
        let parsedHeader: string[] | undefined;
        const prefetchCounted = () => {
          if (!counted || !parsedHeader || parsedHeader.indexOf(CURSOR_COLUMN) !== parsedHeader.length - 1) return;
          // The header row is the first record counted.
          if (counted.rows - 1 === this.limit && counted.lastCursor) this.prefetch(entry, counted.lastCursor);
        };
        const reader = raw
          ? undefined
          : await readCsvPage(
              recordsCounted(res.body, (page) => {
                counted = page;
                prefetchCounted();
              }),
              res.request,
            );
        const header = (raw ?? reader)!.header;
        parsedHeader = header;
        prefetchCounted();
        const bytes = () => (raw ?? reader)!.bytes();
        const cursorAt = header.indexOf(CURSOR_COLUMN);
        if (cursorAt < 0) {
          res.body.destroy();
          throw new StreamAbortedError(res.request, bytes(), new Error("the header has no _cursor column"));
        }
        const { plan: applied, columns } = await planForHeader(this.target, basePlan, header, ds.columns);
        const at = this.now().toISOString();
        const advance = (count: number, lastCursor: string | null): DatasetState => {
          if (count === this.limit && lastCursor) this.prefetch(entry, lastCursor);
          return advanced(count, lastCursor);
        };
        // `pages`: 1 for a page written, 0 for a part of one (RawPageWrite.statePart).
        const advanced = (count: number, lastCursor: string | null, pages = 1): DatasetState => ({
          ...ds,
          columns,
          cursor: lastCursor ?? ds.cursor,
          cursorAt: lastCursor ? at : ds.cursorAt,
          pages: ds.pages + pages,
          rowsUpserted: ds.rowsUpserted + count,
        });
        let next: DatasetState | undefined;
        let count = 0;
        if (raw) {
          const written = await this.target.writeRawPage!({
            plan: applied,
            header,
            records: raw.records,
            assertCleanEnd: raw.assertCleanEnd,
            cursorColumn: cursorAt,
            generation: ds.generation,
            append: ds.appending,
            stateAfter: (page) => (next = advance(page.rows, page.lastCursor)),
            statePart: (part) => advanced(part.rows, part.lastCursor, 0),
            recordsSeen: (page) => {
              if (page.rows === this.limit && page.lastCursor) this.prefetch(entry, page.lastCursor);
            },
          });
          count = written.rows;
        } else {
          // The reader counts the rows it hands out: no wrapper between it and the target.
          const rowsOf = reader!;
          await this.target.writePage({
            plan: applied,
            header,
            rows: rowsOf.rows,
            generation: ds.generation,
            append: ds.appending,
            stateAfter: () => (next = advance(rowsOf.rowsRead(), rowsOf.lastRow()?.[cursorAt] ?? null)),
          });
          count = rowsOf.rowsRead();
        }
        const seconds = (Date.now() - started) / 1000;
        this.emit({ event: "page", dataset: entry.key, rows: count, totalRows: rowsSoFar + count, bytes: bytes(), rowsPerSecond: Math.round((rowsSoFar + count) / Math.max(seconds, 0.001)) });
        return { rows: count, next: next! };
      } catch (err) {
        if (err instanceof AppendRefused && ds.appending) {
          // Not a failed attempt: the page is fine, the append was not (once per read at most).
          res?.body.on("error", () => undefined);
          res?.body.destroy();
          ds = { ...ds, appending: false };
          attempt--;
          continue;
        }
        if (!(err instanceof StreamAbortedError) || attempt >= attempts || this.stopping) throw err;
        const delayMs = backoffDelay(this.client.retry, attempt);
        this.emit({ event: "page-retry", dataset: entry.key, attempt, delayMs, message: err.message });
        await sleep(delayMs, this.opts.signal).catch(() => undefined);
      }
    }
  }

  private openPage(entry: ListingEntry, cursor: string | null): Promise<PageResponse> {
    const ahead = this.prefetched.get(entry.key);
    if (ahead && ahead.cursor === cursor) {
      this.prefetched.delete(entry.key);
      return ahead.response;
    }
    this.discardPrefetch(entry.key);
    return this.client.openPage(entry, { cursor, limit: this.limit });
  }

  private prefetch(entry: ListingEntry, cursor: string | null) {
    // Asked for already (as soon as the page's records were seen: RawPageWrite.recordsSeen).
    if (this.prefetched.get(entry.key)?.cursor === cursor) return;
    this.discardPrefetch(entry.key);
    if (this.stopping) return;
    const response = this.client.openPage(entry, { cursor, limit: this.limit });
    // A failure is reported by the read that uses it (or by nobody, when it is discarded).
    response.catch(() => undefined);
    this.prefetched.set(entry.key, { cursor, response });
  }

  private discardPrefetch(key: string) {
    const ahead = this.prefetched.get(key);
    if (!ahead) return;
    this.prefetched.delete(key);
    ahead.response.then(
      (res) => {
        // Destroying an unread body emits an abort error: expected here.
        res.body.on("error", () => undefined);
        res.body.destroy();
      },
      () => undefined,
    );
  }

  /** Polls until the signal fires: a run, then `intervalMs` of waiting (cut short by the signal). */
  async watch(intervalMs: number, onRun: (summary: RunSummary | Error) => void): Promise<void> {
    while (!this.stopping) {
      try {
        onRun(await this.runOnce());
      } catch (err) {
        if (isApiError(err, 401) || isApiError(err, 404, "ORGANIZATION_NOT_CONFIGURED")) throw err;
        onRun(err as Error);
      }
      await sleep(intervalMs, this.opts.signal).catch(() => undefined);
    }
  }
}

/** The dataset's table: named after its key, typed from the listing, keyed on id (and row_index). */
export function planTable(entry: ListingEntry): TablePlan {
  const columns: Record<string, string> = {};
  for (const c of entry.columns) if (c.key !== CURSOR_COLUMN) columns[c.key] = c.dataType;
  if (!("id" in columns)) columns.id = "uuid";
  return { table: entry.key, keyColumns: isGridDataset(entry) ? ["id", "row_index"] : ["id"], columns };
}
