/**
 * The rewrite feed's rows reach the copy even when its header has a column the listing lacked (a
 * publish between the listing and the feed page), and an extension's request for a full read is
 * never dropped by finishing the dataset as if it were current.
 *
 * A scripted API stands in for the server, so each race is exact: the engine, the built-in
 * extensions and a real target (SQLite, no server needed) run unchanged. Before the fix, a full read
 * whose rewrite feed page had such a column cleared the feed's cursor, finished the dataset with the
 * listing's changeToken and never applied the page: the copy kept a renamed site's old name until
 * the dataset changed again (soak run 6: 5 rows of one organization).
 */
import "../../../test/support/linked/better-sqlite3";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExportApiClient } from "../src/api/client";
import { SyncEngine } from "../src/engine";
import { REWRITE_FEED, type RewriteFeedState } from "../src/feeds";
import type { SyncExtension } from "../src/hooks";
import { openTarget } from "../src/targets";

const A = "00000000-0000-4000-8000-00000000000a";
const KEY = "site_checks";
const AT = "2024-01-01T00:00:00.000Z";

interface Scene {
  changeToken: string;
  rewriteToken: string;
  /** The CSV page for a request without a cursor (every page ends the dataset: one row). */
  page: string;
  /** The rewrite feed page per cursor ("" for none). */
  rewrites: Record<string, string>;
}

const csv = (header: string[], rows: string[][]) => [header, ...rows].map((r) => r.join(",")).join("\n") + "\n";

/** A minimal export API: the listing (ETag from the scene), one CSV page, the feeds. */
async function fakeApi(scene: () => Scene, requests: string[]): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url!, "http://x");
    const cursor = url.searchParams.get("cursor") ?? "";
    requests.push(`${url.pathname}${cursor ? `?cursor=${cursor}` : ""}`);
    const s = scene();
    const etag = `"${s.changeToken}.${s.rewriteToken}"`;
    if (url.pathname === "/v1/datasets") {
      if (req.headers["if-none-match"] === etag) return void res.writeHead(304, { etag }).end();
      const entry = {
        key: KEY,
        displayName: "Site checks",
        columns: [
          { key: "id", dataType: "uuid" },
          { key: "last_modified", dataType: "dateTime" },
          { key: "site_name", dataType: "text" },
          { key: "_cursor", dataType: "text" },
        ],
        links: { csv: `/v1/datasets/${KEY}/csv`, rewrites: `/v1/datasets/${KEY}/rewrites`, deletions: `/v1/datasets/${KEY}/deletions` },
        changeToken: s.changeToken,
        rewriteToken: s.rewriteToken,
      };
      return void res.writeHead(200, { "content-type": "application/json", etag }).end(JSON.stringify([entry]));
    }
    res.writeHead(200, { "content-type": "text/csv; charset=utf-8" });
    if (url.pathname.endsWith("/csv")) return void res.end(cursor ? csv(["id", "last_modified", "site_name", "_cursor"], []) : s.page);
    if (url.pathname.endsWith("/rewrites")) return void res.end(s.rewrites[cursor] ?? csv(["id", "last_modified", "site_name", "_cursor"], []));
    res.end(csv(["id", "deleted_at", "_cursor"], []));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe("sync engine: the rewrite feed against a scripted API", () => {
  let dir: string;
  let server: Server | undefined;
  let client: ExportApiClient | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sync-rewrite-columns-"));
  });
  afterEach(async () => {
    await client?.close();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  async function pass(url: string, extensions: SyncExtension[] = []) {
    const target = openTarget(`sqlite:${join(dir, "copy.sqlite")}`);
    await target.open({ writer: true });
    try {
      const summary = await new SyncEngine(client!, target, { extensions }).runOnce();
      const state = await target.loadState();
      return { summary, state: state.datasets.get(KEY)! };
    } finally {
      await target.close();
    }
  }

  async function stored(): Promise<Record<string, unknown>[]> {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(join(dir, "copy.sqlite"), { readonly: true });
    try {
      return db.prepare(`SELECT * FROM ${KEY}`).all() as Record<string, unknown>[];
    } finally {
      db.close();
    }
  }

  async function start(scene: () => Scene, requests: string[] = []) {
    const api = await fakeApi(scene, requests);
    server = api.server;
    client = new ExportApiClient({ baseUrl: api.url, apiKey: "ak_test", retry: { maxAttempts: 1 } });
    return api.url;
  }

  const OLD_HEADER = ["id", "last_modified", "site_name", "_cursor"];
  const NEW_HEADER = ["id", "last_modified", "site_name", "text_183", "_cursor"];

  it("applies a feed page with a new column during a full read that kept its feed cursor (a republish), and the copy ends current", async () => {
    let scene: Scene = {
      changeToken: "t1",
      rewriteToken: "r1",
      page: csv(OLD_HEADER, [[A, AT, "cedar sites 1", "p1"]]),
      rewrites: { "": csv(OLD_HEADER, [[A, AT, "cedar sites 1", "rw1"]]) },
    };
    const url = await start(() => scene);
    const first = await pass(url);
    expect(first.summary.failed).toEqual([]);
    expect((first.state.extensions[REWRITE_FEED] as RewriteFeedState).cursor).toBe("rw1");

    // A republish moves rewriteToken (a full read that keeps its feed cursor); the page is read
    // before the site's rename, the feed after it, and by then the form has a new field too.
    scene = {
      ...scene,
      changeToken: "t2",
      rewriteToken: "r2",
      rewrites: { rw1: csv(NEW_HEADER, [[A, AT, "Ærø site 184", "", "rw2"]]) },
    };
    const second = await pass(url);
    expect(second.summary.failed).toEqual([]);
    expect(second.summary.synced).toEqual([KEY]);
    expect(await stored()).toEqual([expect.objectContaining({ id: A, site_name: "Ærø site 184", text_183: null })]);
    expect(second.state.columns.text_183).toBe("text");
    expect((second.state.extensions[REWRITE_FEED] as RewriteFeedState).cursor).toBe("rw2");

    // Nothing else moved: the next pass is a 304 and the copy stays current.
    const third = await pass(url);
    expect(third.summary.listing).toBe("not-modified");
    expect((await stored())[0].site_name).toBe("Ærø site 184");
  });

  it("applies such a page on a first sync (no feed cursor) instead of failing the pass", async () => {
    const scene: Scene = {
      changeToken: "t1",
      rewriteToken: "r1",
      page: csv(OLD_HEADER, [[A, AT, "cedar sites 1", "p1"]]),
      rewrites: { "": csv(NEW_HEADER, [[A, AT, "Ærø site 184", "7", "rw1"]]) },
    };
    const url = await start(() => scene);
    const { summary, state } = await pass(url);
    expect(summary.failed).toEqual([]);
    expect(state.inProgress).toBe(false);
    expect(await stored()).toEqual([expect.objectContaining({ site_name: "Ærø site 184", text_183: "7" })]);
  });

  it("an extension asking for a full read again during the full read it asked for leaves the dataset failed and in a full read, which the next pass makes", async () => {
    const scene: Scene = { changeToken: "t1", rewriteToken: "r1", page: csv(OLD_HEADER, [[A, AT, "cedar sites 1", "p1"]]), rewrites: {} };
    const requests: string[] = [];
    const url = await start(() => scene, requests);
    let asks = 2;
    const insistent: SyncExtension = { name: "insistent", afterPages: async () => (asks-- > 0 ? { fullRead: "test says so" } : undefined) };

    const first = await pass(url, [insistent]);
    expect(first.summary.synced).toEqual([]);
    expect(first.summary.failed).toEqual([{ dataset: KEY, message: expect.stringMatching(/test says so.*next pass reads the dataset in full/), errorCode: undefined }]);
    expect(first.state).toMatchObject({ inProgress: true, phase: "full", cursor: null });
    // The first sync's read and the one restart; the dataset was not finished as current.
    expect(requests.filter((r) => r.endsWith("/csv"))).toHaveLength(2);

    requests.length = 0;
    const second = await pass(url, [insistent]);
    expect(second.summary.failed).toEqual([]);
    expect(second.summary.synced).toEqual([KEY]);
    expect(second.state).toMatchObject({ inProgress: false, phase: "incremental", changeToken: "t1" });
    expect(requests.filter((r) => r.endsWith("/csv"))).toHaveLength(1);
  });
});
