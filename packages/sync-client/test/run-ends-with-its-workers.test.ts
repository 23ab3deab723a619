/**
 * How a run's failures are contained, against a scripted API and a PostgreSQL copy (the target that
 * runs datasets concurrently; DATABASE_URL, default the local server):
 * - an error that ends a run (here a 401: an identity problem) must not leave the run's other
 *   workers writing to the copy after runOnce has thrown: they finish the dataset in hand, take no
 *   other, and only then is the error thrown. Otherwise a next run (watch polls again at once)
 *   could race a page of the abandoned one, an older page landing over what the new run wrote;
 * - a page the copy refuses (a value its typed column cannot hold) fails that dataset alone: before,
 *   it ended the run, and every dataset listed after it waited until the refusal went away.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ExportApiClient } from "../src/api/client";
import { SyncEngine } from "../src/engine";
import { openTarget } from "../src/targets";
import { databaseUrl, onItsOwnConnection, SERVER } from "./postgres-admin";

const A = "00000000-0000-4000-8000-000000000001";
const page = (amount: string) => `id,last_modified,amount,_cursor\n${A},2024-01-01T00:00:00.000Z,${amount},c1\n`;
const COLUMNS = [
  { key: "id", dataType: "uuid" },
  { key: "last_modified", dataType: "dateTime" },
  { key: "amount", dataType: "number" },
  { key: "_cursor", dataType: "text" },
];

type Respond = (res: ServerResponse) => void;
const csv = (body: string, delayMs = 0): Respond => (res) => void setTimeout(() => res.writeHead(200, { "content-type": "text/csv" }).end(body), delayMs);
const unauthorized: Respond = (res) =>
  void res.writeHead(401, { "content-type": "application/problem+json" }).end(JSON.stringify({ type: "about:blank", title: "Unauthorized", status: 401, errorCode: "UNAUTHORIZED" }));

describe("sync engine: what a failure ends", () => {
  let database: string;
  let server: Server;
  let client: ExportApiClient;
  let datasets: Record<string, Respond>;
  let requests: Array<{ path: string; at: number }>;

  beforeEach(async () => {
    database = `sync_runs_${randomBytes(4).toString("hex")}`;
    requests = [];
    await onItsOwnConnection(SERVER, `CREATE DATABASE ${database}`);
    server = createServer((req: IncomingMessage, res) => {
      const path = new URL(req.url!, "http://x").pathname;
      requests.push({ path, at: Date.now() });
      if (path === "/v1/datasets") {
        const listing = Object.keys(datasets).map((key) => ({ key, columns: COLUMNS, links: { csv: `/v1/datasets/${key}/csv` }, changeToken: `t-${key}` }));
        return void res.writeHead(200, { "content-type": "application/json", etag: '"l1"' }).end(JSON.stringify(listing));
      }
      datasets[path.split("/")[3]](res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    client = new ExportApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: "ak_test", retry: { maxAttempts: 1 } });
  });
  afterEach(async () => {
    await client.close();
    await new Promise((resolve) => server.close(resolve));
    await onItsOwnConnection(SERVER, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  });

  async function withCopy<T>(work: (target: ReturnType<typeof openTarget>) => Promise<T>): Promise<T> {
    const target = openTarget(databaseUrl(database), { concurrency: 2 });
    await target.open({ writer: true });
    try {
      return await work(target);
    } finally {
      await target.close();
    }
  }

  it("a 401 is thrown only after the other worker's dataset is done, and no dataset starts after it", async () => {
    datasets = { a_fails: unauthorized, b_slow: csv(page("1"), 600), c_queued: csv(page("2")) };
    let thrownAt = 0;
    const state = await withCopy(async (target) => {
      await expect(
        new SyncEngine(client, target, { concurrency: 2 }).runOnce().finally(() => {
          thrownAt = Date.now();
        }),
      ).rejects.toMatchObject({ status: 401 });
      // Anything an abandoned worker would still do happens within this wait.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return target.loadState();
    });
    expect(state.datasets.get("b_slow")).toMatchObject({ inProgress: false, changeToken: "t-b_slow" });
    const slowPage = requests.find((r) => r.path === "/v1/datasets/b_slow/csv")!;
    expect(thrownAt).toBeGreaterThanOrEqual(slowPage.at + 600);
    expect(requests.filter((r) => r.path.startsWith("/v1/datasets/c_queued/"))).toEqual([]);
    expect(await onItsOwnConnection(databaseUrl(database), "SELECT amount::text FROM b_slow")).toEqual([{ amount: "1" }]);
  });

  it("a page the copy refuses fails its dataset alone; the datasets after it are synced", async () => {
    datasets = { a_refused: csv(page("raven 62")), b_after: csv(page("7")) };
    const summary = await withCopy((target) => new SyncEngine(client, target).runOnce());
    expect(summary.failed).toEqual([{ dataset: "a_refused", message: expect.stringContaining("raven 62"), errorCode: undefined }]);
    expect(summary.synced).toEqual(["b_after"]);
    expect(await onItsOwnConnection(databaseUrl(database), "SELECT amount::text FROM b_after")).toEqual([{ amount: "7" }]);
    const state = await withCopy((target) => target.loadState());
    expect(state.datasets.get("a_refused")?.lastError?.message).toContain("raven 62");
    // The listing ETag is kept only when every dataset is in the copy.
    expect(state.listingEtag).toBeNull();
  });
});
