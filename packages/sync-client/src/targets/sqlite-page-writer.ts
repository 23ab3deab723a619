/**
 * A SQLite copy's CSV pages written on a thread of their own (a worker with its own connection to
 * the copy file): better-sqlite3 runs every statement on the calling thread, so on the syncing
 * process's own thread a page's inserts held up reading the next page, and the export waited on a
 * full socket meanwhile. Here the syncing thread only reads the body and hands its bytes over; the
 * writer thread parses them (CsvRecords) and writes the page's transaction (PageInserter) while
 * the next page is being read (docs/sync-client.md, "The SQLite writer thread").
 */
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parentPort, Worker, workerData } from "node:worker_threads";
import { CsvRecords, CursorFieldReplaced, PAGE_READ_AHEAD_BYTES, type Cell } from "../csv";
import { openCopyDatabase, PageInserter, PreparedStatements, stateRow, type PageStart, type StateRow } from "./sqlite-pages";
import { AppendRefused, type RawPageWrite } from "./target";

/** What the syncing thread asks; `end`, `commit`, `rollback` and `close` are answered in order (Reply). */
type Request =
  | { op: "begin"; page: PageStart; cursorColumn: number }
  | { op: "chunk"; data: ArrayBuffer }
  | { op: "end" }
  | { op: "commit"; state: StateRow }
  | { op: "rollback" }
  | { op: "close" };

/** A failure as it crosses threads. */
interface FailureText {
  message: string;
  code?: string;
  appendRefused: boolean;
}

type Message =
  | { op: "reply"; value?: unknown; failure?: FailureText }
  /** The thread's connection is open. */
  | { op: "ready" }
  /** A chunk's bytes were written (flow control). */
  | { op: "ack"; bytes: number }
  /** The page failed and was rolled back; later chunks are dropped until the next `begin`. */
  | { op: "failed"; failure: FailureText };

/** The page's records counted by the writer thread: how many, and the last one's cursor. */
interface Counted {
  rows: number;
  lastCursor: string | null;
}

const failureText = (err: unknown): FailureText => ({
  message: err instanceof Error ? err.message : String(err),
  code: (err as { code?: string } | null)?.code,
  appendRefused: err instanceof AppendRefused,
});

function failureOf(text: FailureText): Error {
  if (text.appendRefused) return new AppendRefused("a key of the page is stored already");
  return Object.assign(new Error(text.message), text.code ? { code: text.code } : {});
}

/** The syncing thread's side: one writer thread per copy file, one page at a time. */
export class PageWriterThread {
  private readonly worker: Worker;
  private readonly replies: Array<{ resolve: (value: unknown) => void; reject: (err: Error) => void }> = [];
  /** Bytes handed over and not yet written. */
  private inFlight = 0;
  private drained: (() => void) | null = null;
  /** The current page's failure, reported by the thread. */
  private failure: Error | null = null;
  /** Set once the thread is gone (exited or crashed): every later call fails with it. */
  private gone: Error | null = null;
  /** Settled once the thread has opened its connection (or is gone). */
  readonly ready: Promise<void>;
  private started!: { resolve: () => void; reject: (err: Error) => void };

  constructor(file: string) {
    // The thread loads this module: compiled, as it is; from TypeScript sources (tests, benches), through tsx.
    const load = __filename.endsWith(".ts") ? `require(${JSON.stringify(require.resolve("tsx/cjs"))});` : "";
    this.worker = new Worker(`${load} require(${JSON.stringify(__filename)}).servePageWrites();`, { eval: true, workerData: { file } });
    this.worker.on("message", (message: Message) => this.received(message));
    this.worker.on("error", (err) => this.lost(err));
    this.worker.on("exit", (code) => this.lost(new Error(`the SQLite page writer thread exited (code ${code})`)));
    this.ready = new Promise((resolve, reject) => (this.started = { resolve, reject }));
    // The thread keeps the process alive while it starts, writes a page or closes; idle, it does
    // not (a target left open must not hang a command's exit). A thread lost before it started
    // fails its first page (nobody may be waiting for it yet).
    const idle = () => void this.worker.unref();
    this.ready.then(idle, idle);
  }

  /** True until the thread is gone; a target starts another then. */
  get alive(): boolean {
    return this.gone === null;
  }

  /**
   * One page in one transaction of the writer thread: the records are handed over as they arrive
   * (at most PAGE_READ_AHEAD_BYTES not yet written), counted here on the way so `recordsSeen`
   * learns the page's size as soon as the body has ended; then the state after the records the
   * thread counted is committed with them. Anything that fails rolls the page back.
   */
  async write(write: RawPageWrite): Promise<{ rows: number }> {
    if (this.gone) throw this.gone;
    this.failure = null;
    const { plan, header, generation, append, cursorColumn } = write;
    await this.ready;
    this.worker.ref();
    this.post({ op: "begin", page: { plan, header, generation, append }, cursorColumn });
    try {
      try {
        await pipeline(write.records, new CursorFieldReplaced(null, (page) => write.recordsSeen?.(page)), this.handOver());
      } catch (err) {
        // The thread's failure stopped the body (the page's own error: AppendRefused, say, which the
        // body cut short must not hide); otherwise a body that failed is a failed page.
        if (err !== this.failure && err !== this.gone) write.assertCleanEnd();
        throw err;
      }
      write.assertCleanEnd();
      const counted = (await this.call({ op: "end" })) as Counted;
      await this.call({ op: "commit", state: stateRow(write.stateAfter(counted)) });
      return { rows: counted.rows };
    } catch (err) {
      // Nothing to undo when the thread rolled back already (it answers all the same).
      if (!this.gone) await this.call({ op: "rollback" }).catch(() => undefined);
      throw err;
    } finally {
      this.worker.unref();
    }
  }

  /** Closes the thread's connection, then the thread. */
  async close(): Promise<void> {
    this.worker.ref();
    if (!this.gone) await this.call({ op: "close" }).catch(() => undefined);
    await this.worker.terminate();
  }

  /** The records' bytes to the thread, each chunk copied once into a buffer of its own and moved. */
  private handOver(): Writable {
    return new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        const failed = this.failure ?? this.gone;
        if (failed) return done(failed);
        const copy = new Uint8Array(chunk.length);
        copy.set(chunk);
        const data = copy.buffer;
        this.inFlight += chunk.length;
        this.worker.postMessage({ op: "chunk", data } satisfies Request, [data]);
        if (this.inFlight <= PAGE_READ_AHEAD_BYTES) return done();
        this.drained = () => done(this.failure ?? this.gone ?? undefined);
      },
    });
  }

  private post(request: Request): void {
    this.worker.postMessage(request);
  }

  private call(request: Request): Promise<unknown> {
    if (this.gone) return Promise.reject(this.gone);
    return new Promise((resolve, reject) => {
      this.replies.push({ resolve, reject });
      this.post(request);
    });
  }

  private received(message: Message): void {
    if (message.op === "ready") {
      this.started.resolve();
    } else if (message.op === "ack") {
      this.inFlight -= message.bytes;
      if (this.inFlight <= PAGE_READ_AHEAD_BYTES) this.release();
    } else if (message.op === "failed") {
      this.failure = failureOf(message.failure);
      this.release();
    } else {
      const waiting = this.replies.shift();
      if (message.failure) waiting?.reject(failureOf(message.failure));
      else waiting?.resolve(message.value);
    }
  }

  private release(): void {
    const drained = this.drained;
    this.drained = null;
    drained?.();
  }

  private lost(err: Error): void {
    if (this.gone) return;
    this.gone = err;
    this.started.reject(err);
    for (const waiting of this.replies.splice(0)) waiting.reject(err);
    this.release();
  }
}

/** The writer thread's side (started by PageWriterThread): its own connection, requests in order. */
export function servePageWrites(): void {
  const port = parentPort!;
  const db = openCopyDatabase((workerData as { file: string }).file);
  const statements = new PreparedStatements(db);
  port.postMessage({ op: "ready" } satisfies Message);
  let page: { inserter: PageInserter; parser: CsvRecords; cursorColumn: number } | null = null;
  let failure: unknown = null;
  const fail = (err: unknown) => {
    try {
      page?.inserter.rollback(err);
    } catch (rolledBack) {
      err = rolledBack;
    }
    if (db.inTransaction) db.exec("ROLLBACK");
    page = null;
    failure = err;
    port.postMessage({ op: "failed", failure: failureText(err) } satisfies Message);
  };
  const reply = (answer: () => unknown) => {
    try {
      port.postMessage({ op: "reply", value: answer() } satisfies Message);
    } catch (err) {
      port.postMessage({ op: "reply", failure: failureText(err) } satisfies Message);
    }
  };
  port.on("message", (request: Request) => {
    switch (request.op) {
      case "begin": {
        failure = null;
        const inserter = new PageInserter(db, statements, request.page);
        page = { inserter, parser: new CsvRecords(request.page.header.length), cursorColumn: request.cursorColumn };
        try {
          inserter.begin();
        } catch (err) {
          fail(err);
        }
        return;
      }
      case "chunk": {
        if (page) {
          try {
            for (const row of page.parser.push(Buffer.from(request.data))) page.inserter.add(row);
          } catch (err) {
            fail(err);
          }
        }
        port.postMessage({ op: "ack", bytes: request.data.byteLength } satisfies Message);
        return;
      }
      case "end":
        return reply(() => {
          if (failure) throw failure;
          if (!page) throw new Error("no page is being written");
          page.parser.end();
          const last: Cell[] | null = page.inserter.lastRow;
          return { rows: page.inserter.rows, lastCursor: last?.[page.cursorColumn] ?? null } satisfies Counted;
        });
      case "commit":
        return reply(() => {
          if (!page) throw new Error("no page is being written");
          const { inserter } = page;
          try {
            inserter.commit(request.state);
          } catch (err) {
            inserter.rollback(err);
          } finally {
            page = null;
          }
        });
      case "rollback":
        return reply(() => {
          page = null;
          if (db.inTransaction) db.exec("ROLLBACK");
        });
      case "close":
        return reply(() => db.close());
    }
  });
}
