/**
 * STAND-IN CONSUMER: a minimal loop of the loader rules of docs/contract.md §4, used by the simulator
 * until the reference sync client (`packages/sync-client`, `dataset-sync watch`) exists; then
 * `--consumer sync-client` replaces it (see consumer.ts). Keep it minimal: it is not the product.
 *
 *   tsx scripts/simulate/minimal-consumer.ts watch|once
 *   SYNC_TARGET=postgres://…  EXPORT_BASE_URL=http://…  EXPORT_API_KEY=ak_…  [SYNC_PAGE_LIMIT=200]
 *
 * Rules followed: page each dataset with its `_cursor`, oldest first, until a page has fewer rows
 * than the limit sent; upsert on (`id`, `row_index`); after a dataset's sync, delete a touched id's
 * grid rows above the highest `row_index` seen; skip a dataset whose `changeToken` did not move;
 * 429 → wait Retry-After; 503/5xx/aborted stream → retry the same cursor with backoff;
 * 400 INVALID_CURSOR (dataset reshaped) → start the dataset again from page one; 404 → dataset gone.
 * A page's rows and the cursor after it are written in one transaction, so a kill loses nothing.
 * Events for the fault injector go to stdout as JSON lines.
 */
import { parse } from "csv-parse/sync";
import { Client } from "pg";
import { inTransaction } from "@exportsvc/db";

const BOM = "\uFEFF";

export const TARGET_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS sync_rows (
  dataset text NOT NULL, id uuid NOT NULL, row_index integer NOT NULL, last_modified text NOT NULL,
  data jsonb NOT NULL, synced_at timestamptz NOT NULL, PRIMARY KEY (dataset, id, row_index));
CREATE TABLE IF NOT EXISTS sync_state (dataset text PRIMARY KEY, cursor text, change_token text, grid boolean NOT NULL DEFAULT false,
  followed boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS sync_touched (dataset text NOT NULL, id uuid NOT NULL, max_row_index integer NOT NULL, PRIMARY KEY (dataset, id));
CREATE TABLE IF NOT EXISTS sync_lag (dataset text NOT NULL, id uuid NOT NULL, last_modified timestamptz NOT NULL, synced_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS sync_counters (name text PRIMARY KEY, value bigint NOT NULL);
`;

interface Listing {
  key: string;
  changeToken: string;
  links: { csv: string };
}

class Fatal extends Error {}

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, t: Date.now() })}\n`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class MinimalConsumer {
  private readonly counters = new Map<string, number>();
  constructor(
    private readonly db: Client,
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly pageLimit: number,
  ) {}

  private count(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by);
  }

  private async flushCounters(): Promise<void> {
    if (this.counters.size === 0) return;
    const names = [...this.counters.keys()];
    const values = names.map((n) => this.counters.get(n)!);
    await this.db.query(
      "INSERT INTO sync_counters (name, value) SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT (name) DO UPDATE SET value = sync_counters.value + excluded.value",
      [names, values],
    );
    this.counters.clear();
  }

  /** One HTTP GET with the retry rules; returns the response of a 200 (body unread), or a 400/404 to handle. */
  private async get(url: string): Promise<Response> {
    for (let attempt = 0; attempt < 12; attempt++) {
      let res: Response;
      try {
        res = await fetch(url, { headers: { Authorization: `Bearer ${this.apiKey}` }, signal: AbortSignal.timeout(30_000) });
      } catch {
        this.count("retries");
        await sleep(Math.min(5000, 200 * 2 ** attempt));
        continue;
      }
      if (res.status === 429) {
        this.count("rateLimited");
        await res.arrayBuffer().catch(() => undefined);
        await sleep(Math.max(1, Number(res.headers.get("retry-after") ?? "1")) * 1000);
        continue;
      }
      if (res.status === 401) throw new Fatal("401: the API key was refused");
      if (res.status >= 500) {
        const body = await res.text().catch(() => "");
        if (/DATASET_NOT_EXPORTABLE/.test(body)) return new Response(body, { status: res.status });
        this.count("retries");
        const retryAfter = Number(res.headers.get("retry-after") ?? "0");
        await sleep(retryAfter > 0 ? retryAfter * 1000 : Math.min(5000, 200 * 2 ** attempt));
        continue;
      }
      return res;
    }
    throw new Error(`gave up on ${url} after 12 attempts`);
  }

  private async listing(): Promise<Listing[]> {
    for (;;) {
      const res = await this.get(`${this.baseUrl}/v1/datasets`);
      if (res.ok) {
        try {
          return (await res.json()) as Listing[];
        } catch {
          this.count("retries");
          continue;
        }
      }
      throw new Fatal(`listing answered ${res.status}`);
    }
  }

  /** Syncs one dataset to its end. Returns true when it reached the end. */
  private async syncDataset(ds: Listing): Promise<boolean> {
    const state = await this.db.query<{ cursor: string | null; change_token: string | null; followed: boolean }>(
      "SELECT cursor, change_token, followed FROM sync_state WHERE dataset = $1",
      [ds.key],
    );
    if (state.rows[0]?.change_token === ds.changeToken && state.rows[0]?.cursor !== undefined) return true;
    let cursor = state.rows[0]?.cursor ?? null;
    // The first read of a dataset key (a new form, or a form renamed to a new key) brings rows
    // changed long ago: not sync lag. Lag is recorded for versions that arrive once a key is followed.
    const recordLag = state.rows[0]?.followed === true;
    let grid = false;
    let aborts = 0;
    // Keys seen in this pass: during a quiet full export none may come twice (the verdict's duplicates).
    const seen = new Set<string>();
    for (let page = 0; page < 10_000; page++) {
      const url = new URL(ds.links.csv, this.baseUrl);
      url.searchParams.set("limit", String(this.pageLimit));
      if (cursor) url.searchParams.set("cursor", cursor);
      const res = await this.get(url.toString());
      if (res.status === 400 || res.status === 404) {
        const body = await res.text();
        if (res.status === 400 && /INVALID_CURSOR/.test(body)) {
          // The dataset was reshaped (a form publish): start it again from page one.
          this.count("cursorResets");
          await this.db.query("UPDATE sync_state SET cursor = NULL, change_token = NULL WHERE dataset = $1", [ds.key]);
          cursor = null;
          continue;
        }
        if (res.status === 404) {
          this.count("datasetsGone");
          await this.db.query("DELETE FROM sync_state WHERE dataset = $1", [ds.key]);
          return true;
        }
        throw new Fatal(`${ds.key}: 400 ${body.slice(0, 300)}`);
      }
      if (!res.ok) {
        this.count("notExportable");
        return false;
      }
      emit({ event: "page-start", dataset: ds.key });
      let body: string;
      try {
        body = Buffer.from(await res.arrayBuffer()).toString("utf8");
      } catch {
        // The stream was cut after the 200: a failed page, retried from the same cursor.
        this.count("retries");
        this.count("abortedStreams");
        if (++aborts > 10) return false;
        continue;
      }
      if (!body.startsWith(BOM)) throw new Fatal(`${ds.key}: CSV without a byte-order mark`);
      const records: string[][] = parse(body.slice(1), { max_record_size: 64 * 1024 * 1024 });
      const [header, ...rows] = records;
      const cursorAt = header.indexOf("_cursor");
      const rowIndexAt = header.indexOf("row_index");
      grid = rowIndexAt >= 0;
      const byKey = new Map<string, { id: string; rowIndex: number; lastModified: string; data: Record<string, string> }>();
      for (const r of rows) {
        const data: Record<string, string> = {};
        header.forEach((h, i) => {
          if (h !== "_cursor") data[h] = r[i];
        });
        const rowIndex = grid ? Number(data.row_index) : 0;
        const k = `${data.id}/${rowIndex}`;
        if (byKey.has(k)) this.count("duplicatesInPage");
        else if (seen.has(k)) this.count("seenAgainInOnePass");
        seen.add(k);
        byKey.set(k, { id: data.id, rowIndex, lastModified: data.last_modified, data });
      }
      const nextCursor = rows.length > 0 ? rows[rows.length - 1][cursorAt] : cursor;
      const list = [...byKey.values()];
      await inTransaction(this.db, async () => {
        await this.db.query(
          `WITH input AS (SELECT * FROM unnest($2::uuid[], $3::int[], $4::text[], $5::jsonb[]) AS t(id, row_index, last_modified, data)),
           old AS (SELECT r.id, r.row_index, r.last_modified FROM sync_rows r JOIN input i USING (id, row_index) WHERE r.dataset = $1),
           lag AS (INSERT INTO sync_lag (dataset, id, last_modified, synced_at)
                   SELECT DISTINCT $1, i.id, i.last_modified::timestamptz, clock_timestamp() FROM input i LEFT JOIN old o USING (id, row_index)
                    WHERE $6::boolean AND o.last_modified IS DISTINCT FROM i.last_modified)
           INSERT INTO sync_rows (dataset, id, row_index, last_modified, data, synced_at)
           SELECT $1, id, row_index, last_modified, data, clock_timestamp() FROM input
           ON CONFLICT (dataset, id, row_index) DO UPDATE SET last_modified = excluded.last_modified, data = excluded.data, synced_at = excluded.synced_at`,
          [ds.key, list.map((r) => r.id), list.map((r) => r.rowIndex), list.map((r) => r.lastModified), list.map((r) => JSON.stringify(r.data)), recordLag],
        );
        if (grid && list.length > 0) {
          const max = new Map<string, number>();
          for (const r of list) max.set(r.id, Math.max(max.get(r.id) ?? 0, r.rowIndex));
          await this.db.query(
            `INSERT INTO sync_touched (dataset, id, max_row_index) SELECT $1, * FROM unnest($2::uuid[], $3::int[])
             ON CONFLICT (dataset, id) DO UPDATE SET max_row_index = excluded.max_row_index`,
            [ds.key, [...max.keys()], [...max.values()]],
          );
        }
        const done = rows.length < this.pageLimit;
        if (done && grid) {
          await this.db.query(
            `DELETE FROM sync_rows r USING sync_touched t WHERE r.dataset = $1 AND t.dataset = $1 AND r.id = t.id AND r.row_index > t.max_row_index`,
            [ds.key],
          );
          await this.db.query("DELETE FROM sync_touched WHERE dataset = $1", [ds.key]);
        }
        await this.db.query(
          `INSERT INTO sync_state (dataset, cursor, change_token, grid, followed) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (dataset) DO UPDATE SET cursor = excluded.cursor, change_token = excluded.change_token, grid = excluded.grid,
             followed = sync_state.followed OR excluded.followed`,
          [ds.key, nextCursor, done ? ds.changeToken : null, grid, done],
        );
        this.count("pages");
        this.count("rows", rows.length);
        await this.flushCounters();
      });
      emit({ event: "page-end", dataset: ds.key, rows: rows.length });
      cursor = nextCursor;
      if (rows.length < this.pageLimit) return true;
    }
    return false;
  }

  /** One pass over the listing. Returns true when every dataset reached its end. */
  async round(): Promise<boolean> {
    const datasets = await this.listing();
    let complete = true;
    for (const ds of datasets) complete = (await this.syncDataset(ds)) && complete;
    await this.flushCounters();
    return complete;
  }
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  if (mode !== "watch" && mode !== "once") throw new Fatal("usage: minimal-consumer.ts watch|once");
  const need = (name: string) => {
    const v = process.env[name];
    if (!v) throw new Fatal(`${name} is required`);
    return v;
  };
  const target = need("SYNC_TARGET");
  const baseUrl = need("EXPORT_BASE_URL");
  const apiKey = need("EXPORT_API_KEY");
  const pageLimit = Number(process.env.SYNC_PAGE_LIMIT ?? "200");
  const pollMs = Number(process.env.SYNC_POLL_MS ?? "1000");
  let db: Client | undefined;
  for (;;) {
    try {
      db = new Client({ connectionString: target, options: "-c TimeZone=UTC" });
      // A target that goes away fails the query in flight; the loop below reconnects.
      db.on("error", (err) => emit({ event: "error", message: err.message }));
      await db.connect();
      await db.query(TARGET_SCHEMA_SQL);
      const consumer = new MinimalConsumer(db, baseUrl, apiKey, pageLimit);
      if (mode === "once") {
        for (let i = 0; i < 50; i++) if (await consumer.round()) return;
        throw new Fatal("the final sync did not reach the end of every dataset in 50 rounds");
      }
      for (;;) {
        await consumer.round();
        emit({ event: "round-end" });
        await sleep(pollMs);
      }
    } catch (err) {
      if (err instanceof Fatal) throw err;
      emit({ event: "error", message: (err as Error).message });
      await db?.end().catch(() => undefined);
      await sleep(1000);
    }
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`consumer: ${(err as Error).message}\n`);
      process.exit(2);
    },
  );
}
