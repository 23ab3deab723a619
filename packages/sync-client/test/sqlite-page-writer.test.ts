/**
 * The SQLite target writes CSV pages on a thread of its own (PageWriterThread): the records arrive
 * in chunks cut anywhere, the thread parses and writes them in the page's transaction, and the page
 * commits with the state after the records the thread counted. What fails rolls the whole page
 * back, and the thread goes on with the next page.
 */
import "../../../test/support/linked/better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import Database from "better-sqlite3";
import { PAGE_READ_AHEAD_BYTES } from "../src/csv";
import { newDatasetState, type DatasetState } from "../src/state";
import { SqliteTarget } from "../src/targets/sqlite";
import { AppendRefused, type RawPageWrite, type TablePlan } from "../src/targets/target";

const PLAN: TablePlan = { table: "suppliers", keyColumns: ["id"], columns: { id: "uuid", name: "text", active: "boolean", score: "number" } };
const HEADER = ["id", "name", "active", "score", "_cursor"];
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const record = (i: number, name = `supplier ${i}`) => `${id(i)},"${name.replace(/"/g, '""')}",${i % 2 ? "t" : "f"},${i === 2 ? "" : i * 1.5},c${i}\n`;

/** The text cut into chunks of `size` bytes (records and fields split anywhere). */
const chunksOf = (text: string, size: number) => {
  const bytes = Buffer.from(text);
  return Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));
};

describe("SQLite target: CSV pages written on the writer thread", () => {
  let dir: string;
  let file: string;
  let target: SqliteTarget;
  let state: DatasetState;
  let seen: Array<{ rows: number; lastCursor: string | null }>;

  /** A raw page as the engine hands it over: its body not read to its end, or `failure`, fails assertCleanEnd. */
  const page = (records: Readable, opts: { append?: boolean; failure?: Error } = {}): RawPageWrite => ({
    plan: PLAN,
    header: HEADER,
    records,
    assertCleanEnd: () => {
      if (opts.failure) throw opts.failure;
      if (!records.readableEnded) throw new Error("the body was not read to its end");
    },
    cursorColumn: 4,
    generation: 1,
    append: opts.append ?? false,
    stateAfter: (counted) => (state = { ...state, cursor: counted.lastCursor, pages: state.pages + 1, rowsUpserted: state.rowsUpserted + counted.rows }),
    recordsSeen: (counted) => void seen.push(counted),
  });
  const stored = () => {
    const db = new Database(file, { readonly: true });
    try {
      const rows = db.prepare("SELECT id, name, active, score FROM suppliers ORDER BY id").all() as Array<{ id: string; name: string; active: number; score: number | null }>;
      const saved = db.prepare("SELECT state FROM \"dataset_sync$datasets\" WHERE dataset_key = 'suppliers'").get() as { state: string } | undefined;
      return { rows, state: saved ? (JSON.parse(saved.state) as DatasetState) : undefined };
    } finally {
      db.close();
    }
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "sync-page-writer-"));
    file = join(dir, "copy.db");
    target = new SqliteTarget(file);
    await target.open({ writer: true });
    await target.ensureTable(PLAN, {});
    state = { ...newDatasetState("suppliers", "suppliers"), generation: 1 };
    seen = [];
  });
  afterEach(async () => {
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("writes records cut anywhere, quotes, commas and newlines inside fields, and commits the state after the last one", async () => {
    const text = record(1) + record(2, 'a "quoted", name\nover two lines') + record(3, "ünïcödé ✓");
    for (const size of [1, 7, 64, text.length]) {
      await expect(target.writeRawPage(page(Readable.from(chunksOf(text, size))))).resolves.toEqual({ rows: 3 });
    }
    const { rows, state: saved } = stored();
    expect(rows).toEqual([
      { id: id(1), name: "supplier 1", active: 1, score: 1.5 },
      { id: id(2), name: 'a "quoted", name\nover two lines', active: 0, score: null },
      { id: id(3), name: "ünïcödé ✓", active: 1, score: 4.5 },
    ]);
    expect(saved).toMatchObject({ cursor: "c3", pages: 4, rowsUpserted: 12 });
    // Counted on the syncing thread as the body ended: the engine asks for the next page then.
    expect(seen).toEqual(Array(4).fill({ rows: 3, lastCursor: "c3" }));
  });

  it("holds at most PAGE_READ_AHEAD_BYTES not yet written: a page several times larger streams through", async () => {
    const wide = "x".repeat(256 * 1024);
    const rows = Math.ceil((3 * PAGE_READ_AHEAD_BYTES) / wide.length);
    const text = Array.from({ length: rows }, (_, i) => record(i + 1, wide)).join("");
    await expect(target.writeRawPage(page(Readable.from(chunksOf(text, 65_536))))).resolves.toEqual({ rows });
    expect(stored().rows).toHaveLength(rows);
    expect(stored().state).toMatchObject({ cursor: `c${rows}` });
  });

  it("rolls back a page whose body failed, keeps the earlier pages and their state, and writes the next page", async () => {
    await target.writeRawPage(page(Readable.from([Buffer.from(record(1))])));
    const cut = new Error("the body was cut short");
    await expect(target.writeRawPage(page(Readable.from([Buffer.from(record(2) + record(3))]), { failure: cut }))).rejects.toBe(cut);
    expect(stored().rows.map((r) => r.id)).toEqual([id(1)]);
    expect(stored().state).toMatchObject({ cursor: "c1", pages: 1 });
    await expect(target.writeRawPage(page(Readable.from([Buffer.from(record(4))])))).resolves.toEqual({ rows: 1 });
    expect(stored().rows.map((r) => r.id)).toEqual([id(1), id(4)]);
  });

  it("fails a record the thread cannot parse, rolling its page back", async () => {
    await expect(target.writeRawPage(page(Readable.from([Buffer.from(record(1) + `${id(2)},"open quote,t,1,c2\n`)])))).rejects.toThrow(/a record of|quoted field|record terminator/);
    await expect(target.writeRawPage(page(Readable.from([Buffer.from(`${id(5)},too few,c5\n`)])))).rejects.toThrow("a record of 3 fields where the header has 5");
    expect(stored().rows).toEqual([]);
    expect(stored().state).toBeUndefined();
  });

  it("fails the page whose thread is lost, and starts another thread for the next page", async () => {
    await target.writeRawPage(page(Readable.from([Buffer.from(record(1))])));
    const thread = () => Reflect.get(target, "pageWriter") as { worker: { terminate(): Promise<number> } };
    const lostThread = thread();
    // The thread ends while the page's body is still arriving.
    async function* body() {
      yield Buffer.from(record(2));
      await lostThread.worker.terminate();
      yield Buffer.from(record(3));
    }
    await expect(target.writeRawPage(page(Readable.from(body())))).rejects.toThrow(/thread exited/);
    expect(stored().rows.map((r) => r.id)).toEqual([id(1)]);
    expect(stored().state).toMatchObject({ cursor: "c1", pages: 1 });
    await expect(target.writeRawPage(page(Readable.from([Buffer.from(record(4))])))).resolves.toEqual({ rows: 1 });
    expect(thread()).not.toBe(lostThread);
    expect(stored().rows.map((r) => r.id)).toEqual([id(1), id(4)]);
  });

  it("refuses an appended page that meets a stored key (AppendRefused), rolled back whole", async () => {
    await target.writeRawPage(page(Readable.from([Buffer.from(record(2))])));
    const refused = target.writeRawPage(page(Readable.from([Buffer.from(record(1) + record(2) + record(3))]), { append: true }));
    await expect(refused).rejects.toBeInstanceOf(AppendRefused);
    expect(stored().rows.map((r) => r.id)).toEqual([id(2)]);
    expect(stored().state).toMatchObject({ cursor: "c2", pages: 1 });
  });

  it("refuses an appended page meeting a stored key while its body is still arriving, as AppendRefused, not as a body cut short", async () => {
    await target.writeRawPage(page(Readable.from([Buffer.from(record(2))])));
    // More than PAGE_READ_AHEAD_BYTES: the thread refuses the page before the body has been handed over.
    const wide = "x".repeat(1024);
    const text = [2, ...Array.from({ length: Math.ceil((2 * PAGE_READ_AHEAD_BYTES) / wide.length) }, (_, i) => i + 10)].map((i) => record(i, wide)).join("");
    await expect(target.writeRawPage(page(Readable.from(chunksOf(text, 65_536)), { append: true }))).rejects.toBeInstanceOf(AppendRefused);
    expect(stored().rows.map((r) => r.id)).toEqual([id(2)]);
  });
});
