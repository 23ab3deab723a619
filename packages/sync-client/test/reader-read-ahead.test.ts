/**
 * The SQLite target (its pages written on a thread of their own) gets the next page asked for as
 * soon as a full page's body has ended, while that page's rows are still being written (its records
 * counted as they are handed over: docs/sync-client.md, "Appending"); a short page asks for nothing more. A dataset's
 * first page is asked for while its table is made ready.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "../../../test/support/linked/better-sqlite3";
import { ExportApiClient } from "../src/api/client";
import { SyncEngine } from "../src/engine";
import { SqliteTarget } from "../src/targets/sqlite";
import { PageWriterThread } from "../src/targets/sqlite-page-writer";
import type { StateRow } from "../src/targets/sqlite-pages";

const COLUMNS = [
  { key: "id", dataType: "uuid" },
  { key: "last_modified", dataType: "dateTime" },
  { key: "name", dataType: "text" },
  { key: "_cursor", dataType: "text" },
];
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const row = (i: number) => `${id(i)},2024-01-01 00:00:0${i}+00,"name ${i}, quoted",c${i}\n`;
const HEADER = "\uFEFFid,last_modified,name,_cursor\n";
/** Pages of two rows: the first two full, the last short. */
const PAGES: Record<string, string> = { "": HEADER + row(1) + row(2), c2: HEADER + row(3) + row(4), c4: HEADER + row(5) };

describe("sync engine: a parsed page's next page asked for before its rows are written", () => {
  let server: Server;
  let requests: string[];
  let dir: string;

  beforeEach(async () => {
    requests = [];
    dir = mkdtempSync(join(tmpdir(), "sync-read-ahead-"));
    server = createServer((req, res) => {
      const url = new URL(req.url!, "http://x");
      if (url.pathname === "/v1/datasets") {
        return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify([{ key: "products", columns: COLUMNS, links: { csv: "/v1/datasets/products/csv" }, changeToken: "t1" }]));
      }
      const cursor = url.searchParams.get("cursor") ?? "";
      requests.push(cursor);
      res.writeHead(200, { "content-type": "text/csv" }).end(PAGES[cursor]);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  });
  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  /** One pass (pages of two rows) from the test's server into `target`, which must sync all five rows; the target stays open. */
  async function syncedInto<T extends SqliteTarget>(target: T): Promise<T> {
    await target.open({ writer: true });
    const client = new ExportApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: "ak_test", retry: { maxAttempts: 1 } });
    try {
      expect(await new SyncEngine(client, target, { limit: 2 }).runOnce()).toMatchObject({ failed: [], rows: 5 });
      return target;
    } catch (err) {
      await target.close();
      throw err;
    } finally {
      await client.close();
    }
  }

  it("asks for page two while page one's rows are still being written, and after the short page for nothing", async () => {
    /** Each page's commit on the writer thread is held until the page after it is asked for (or 2 s); what was asked by then is noted. */
    const askedBeforeWritten: string[][] = [];
    const call = Reflect.get(PageWriterThread.prototype, "call") as (this: PageWriterThread, request: { op: string; state?: StateRow }) => Promise<unknown>;
    const held = jest.spyOn(PageWriterThread.prototype as unknown as { call: typeof call }, "call").mockImplementation(async function (this: PageWriterThread, request) {
      if (request.op === "commit") {
        // The page ending at `cursor`: the next one is asked for with it (none after the short page, c5).
        const { cursor } = JSON.parse(request.state!.json) as { cursor: string };
        for (let waited = 0; !requests.includes(cursor) && waited < 2000 && cursor !== "c5"; waited += 20) await new Promise((r) => setTimeout(r, 20));
        askedBeforeWritten.push([...requests]);
      }
      return call.call(this, request);
    });
    try {
      const target = await syncedInto(new SqliteTarget(join(dir, "copy.db")));
      expect(askedBeforeWritten).toEqual([["", "c2"], ["", "c2", "c4"], ["", "c2", "c4"]]);
      expect(requests).toEqual(["", "c2", "c4"]);
      expect(await target.countRows("products")).toBe(5);
      await target.close();
    } finally {
      held.mockRestore();
    }
  });

  it("asks for a dataset's first page while its table is made ready, and uses that answer", async () => {
    /** The table is held until the first page is asked for (or 2 s); whether it was by then is noted. */
    let askedBeforeTable: string[] | undefined;
    class Gated extends SqliteTarget {
      override async ensureTable(...args: Parameters<SqliteTarget["ensureTable"]>) {
        for (let waited = 0; requests.length === 0 && waited < 2000; waited += 20) await new Promise((r) => setTimeout(r, 20));
        askedBeforeTable = [...requests];
        return super.ensureTable(...args);
      }
    }
    await (await syncedInto(new Gated(join(dir, "copy.db")))).close();
    expect(askedBeforeTable).toEqual([""]);
    // The first page was asked for once: the read used the early answer.
    expect(requests).toEqual(["", "c2", "c4"]);
  });
});
