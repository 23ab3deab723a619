/**
 * The built-in sync extensions (src/hooks.ts): the deletion feed and the rewrite signal.
 *
 * Deletion feed: after a dataset's incremental pages, its `links.deletions` is paged from the
 * stored deletions cursor to a short page; each page's tombstones delete the stored rows with that
 * id (grid datasets: every row) whose `last_modified` is older than `deleted_at`, in one
 * transaction with the new deletions cursor. A deleted-then-recreated row has a newer
 * `last_modified` than its tombstone and is kept, whichever order the two are read in. A copy
 * without a deletions cursor (a first sync, an expired cursor) reads the feed from its beginning
 * after its full read: every tombstone still retained, so also one written while the full read ran,
 * is seen, and the older ones do nothing under the rule. 410 DELETIONS_CURSOR_EXPIRED asks the
 * engine for a full re-read (whose sweep removes what the pruned tombstones would have) and restarts
 * the feed without a cursor.
 *
 * Rewrite feed: after the incremental pages (and before the deletion feed), `links.rewrites` is paged
 * from the stored rewrites cursor to a short page; each page's rows (the dataset's own columns, their
 * current text) are upserted exactly as CSV rows are, in one transaction with the new rewrites cursor.
 * A feed header with a column the listing lacked (a publish after the listing) adds it to the table,
 * as a CSV page does: the rows are applied now, never skipped (the next listing shows the publish).
 * A copy without a rewrites cursor reads the feed from its beginning after its full read (a rename
 * while the full read ran is seen; older entries upsert the text the copy already has). 400
 * REWRITES_CURSOR_EXPIRED asks for a full re-read and restarts the feed without a cursor.
 *
 * Rewrite signal: the listing's `rewriteToken` at the start of a full read is recorded when that
 * full read ends; a listed token different from the recorded one asks for a full re-read (a
 * regeneration: what the rewrite feed cannot express).
 */
import { sleep } from "./api/client";
import { StreamAbortedError, isApiError } from "./api/errors";
import { backoffDelay } from "./api/retry";
import { CURSOR_COLUMN, type ListingEntry } from "./api/types";
import { readCsvPage, type Cell } from "./csv";
import type { AfterPagesResult, DatasetContext, SyncExtension } from "./hooks";
import { planForHeader } from "./page-plan";
import type { DatasetState } from "./state";

export const DELETIONS = "deletions";
export const REWRITES = "rewrites";

export interface DeletionsState {
  /** `_cursor` of the last tombstone applied; null: the feed is read from its beginning. */
  cursor: string | null;
  /** When the last 410 DELETIONS_CURSOR_EXPIRED was answered. */
  expiredAt?: string | null;
  tombstonesRead?: number;
}

export interface RewritesState {
  /** rewriteToken of the listing when the last completed full read started. */
  token: string | null;
  /** rewriteToken when the full read in progress started. */
  pendingToken: string | null;
}

export const REWRITE_FEED = "rewrite-feed";

/** An extension's position in the dataset state, or where it starts. */
const extensionState = <S>(name: string, initial: () => S) => (state: DatasetState): S => (state.extensions[name] as S | undefined) ?? initial();

/** Reads one page of a feed whole: a cut stream is retried from the same cursor, with the client's page backoff. */
async function readFeedPage<T>(ctx: DatasetContext, read: () => Promise<T>): Promise<T> {
  const attempts = ctx.client.retry.pageAttempts;
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof StreamAbortedError) || attempt >= attempts || ctx.signal?.aborted) throw err;
      await sleep(backoffDelay(ctx.client.retry, attempt), ctx.signal).catch(() => undefined);
    }
  }
}

export interface RewriteFeedState {
  /** `_cursor` of the last rewritten row applied; null: the feed is read from its beginning. */
  cursor: string | null;
  rowsRewritten?: number;
}

export const rewriteFeedState = extensionState<RewriteFeedState>(REWRITE_FEED, () => ({ cursor: null }));

export function rewriteFeed(): SyncExtension {
  return {
    name: REWRITE_FEED,
    async afterPages(ctx: DatasetContext): Promise<AfterPagesResult | void> {
      if (typeof ctx.entry.links.rewrites !== "string") return; // a server without the feed: the rewriteToken alone
      for (;;) {
        if (ctx.signal?.aborted) return;
        const feed = rewriteFeedState(ctx.state);
        let rows: number;
        try {
          rows = await applyRewritePage(ctx, feed);
        } catch (err) {
          if (!isApiError(err, 400, "REWRITES_CURSOR_EXPIRED") || feed.cursor === null) throw err;
          ctx.state.extensions[REWRITE_FEED] = { ...feed, cursor: null } satisfies RewriteFeedState;
          // A full read that just ended already holds every row's current text: restart the feed at once.
          if (ctx.state.phase === "full") continue;
          return { fullRead: "rewrites cursor expired (400 REWRITES_CURSOR_EXPIRED)" };
        }
        if (rows < ctx.limit) return;
      }
    },
  };
}

/**
 * One page of the rewrite feed upserted like a CSV page (target.writePage), with the new rewrites
 * cursor in the same transaction. Read whole-or-nothing: a cut stream is retried from the same cursor.
 */
async function applyRewritePage(ctx: DatasetContext, feed: RewriteFeedState): Promise<number> {
  return readFeedPage(ctx, async () => {
    const res = await ctx.client.openRewrites(ctx.entry, { cursor: feed.cursor, limit: ctx.limit });
    const reader = await readCsvPage(res.body, res.request);
    const cursorAt = reader.header.indexOf(CURSOR_COLUMN);
    if (cursorAt < 0) {
      res.body.destroy();
      throw new StreamAbortedError(res.request, reader.bytes(), new Error("the rewrite feed's header lacks _cursor"));
    }
    const { plan, columns } = await planForHeader(ctx.target, ctx.plan, reader.header, ctx.state.columns);
    ctx.state.columns = columns;
    let count = 0;
    let lastCursor: string | null = feed.cursor;
    async function* rows(source: AsyncIterable<Cell[]>): AsyncGenerator<Cell[]> {
      for await (const row of source) {
        count++;
        lastCursor = row[cursorAt];
        yield row;
      }
    }
    let next: RewriteFeedState | undefined;
    await ctx.target.writePage({
      plan,
      header: reader.header,
      rows: rows(reader.rows),
      generation: ctx.state.generation,
      // Rewritten rows replace stored ones.
      append: false,
      stateAfter: () => {
        next = { ...feed, cursor: lastCursor, rowsRewritten: (feed.rowsRewritten ?? 0) + count };
        return { ...ctx.state, extensions: { ...ctx.state.extensions, [REWRITE_FEED]: next } };
      },
    });
    ctx.state.extensions[REWRITE_FEED] = next!;
    return count;
  });
}

export const deletionsState = extensionState<DeletionsState>(DELETIONS, () => ({ cursor: null }));

export function deletionFeed(): SyncExtension {
  return {
    name: DELETIONS,
    async afterPages(ctx: DatasetContext): Promise<AfterPagesResult | void> {
      if (typeof ctx.entry.links.deletions !== "string") return; // a server without the feed: --full-every alone
      let deleted = 0;
      for (;;) {
        if (ctx.signal?.aborted) return { deleted };
        const feed = deletionsState(ctx.state);
        let page: Array<{ id: string; deletedAt: string; cursor: string }>;
        try {
          page = await readTombstones(ctx, feed.cursor);
        } catch (err) {
          if (!isApiError(err, 410, "DELETIONS_CURSOR_EXPIRED") || feed.cursor === null) throw err;
          ctx.state.extensions[DELETIONS] = { ...feed, cursor: null, expiredAt: new Date().toISOString() } satisfies DeletionsState;
          // Tombstones were pruned before this copy read them: only a full read (and its sweep) can tell
          // which rows left. A full read that just ended already did that: restart the feed at once.
          if (ctx.state.phase === "full") continue;
          return { fullRead: "deletions cursor expired (410 DELETIONS_CURSOR_EXPIRED)", deleted };
        }
        const last = page.length ? page[page.length - 1].cursor : feed.cursor;
        const next: DeletionsState = { ...feed, cursor: last, tombstonesRead: (feed.tombstonesRead ?? 0) + page.length };
        const state: DatasetState = { ...ctx.state, extensions: { ...ctx.state.extensions, [DELETIONS]: next } };
        if (page.length) deleted += await ctx.target.applyTombstones({ plan: ctx.plan, tombstones: page, state });
        ctx.state.extensions[DELETIONS] = next;
        ctx.state.rowsDeleted = state.rowsDeleted;
        if (page.length < ctx.limit) return { deleted };
      }
    },
  };
}

/** One page of the deletion feed, read whole (retried from the same cursor when the stream is cut). */
async function readTombstones(ctx: DatasetContext, cursor: string | null) {
  return readFeedPage(ctx, async () => {
    const res = await ctx.client.openDeletions(ctx.entry, { cursor, limit: ctx.limit });
    const reader = await readCsvPage(res.body, res.request);
    const [id, deletedAt, cur] = ["id", "deleted_at", "_cursor"].map((k) => reader.header.indexOf(k));
    if (id < 0 || deletedAt < 0 || cur < 0) {
      res.body.destroy();
      throw new StreamAbortedError(res.request, reader.bytes(), new Error("the deletion feed's header lacks id, deleted_at or _cursor"));
    }
    const rows: Array<{ id: string; deletedAt: string; cursor: string }> = [];
    for await (const row of reader.rows) rows.push({ id: row[id]!, deletedAt: row[deletedAt]!, cursor: row[cur]! });
    return rows;
  });
}

export function rewriteSignal(): SyncExtension {
  const get = extensionState<RewritesState>(REWRITES, () => ({ token: null, pendingToken: null }));
  return {
    name: REWRITES,
    fullReadReason(entry: ListingEntry, state: DatasetState) {
      if (entry.rewriteToken === undefined || !state.lastFullReadAt) return undefined;
      const { token } = get(state);
      if (token === null) return "rewriteToken not recorded yet";
      return token === entry.rewriteToken ? undefined : "rewriteToken moved";
    },
    onFullReadStart(entry, state) {
      state.extensions[REWRITES] = { ...get(state), pendingToken: entry.rewriteToken ?? null } satisfies RewritesState;
    },
    beforeFinish(_entry, state, wasFull) {
      if (!wasFull) return;
      const current = get(state);
      state.extensions[REWRITES] = { token: current.pendingToken, pendingToken: null } satisfies RewritesState;
    },
  };
}

/** The extensions every engine runs (before any given in SyncOptions.extensions). */
export const builtinExtensions = (): SyncExtension[] => [rewriteSignal(), rewriteFeed(), deletionFeed()];
