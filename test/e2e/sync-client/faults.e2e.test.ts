/**
 * The sync client's failure handling against the real stack: a renamed form, a publish that adds
 * a column in the middle of a backfill, DATASET_NOT_EXPORTABLE on one dataset, streams aborted
 * mid-body, and 429s from low rate limits all end in a correct copy.
 */
import { startE2E } from "../../support/fixture";
import { field, site, waitFor, csvPath } from "../../support/forms";
import { ExportApiClient, SyncEngine, openTarget } from "../../../packages/sync-client/src";
import { copyRows, startCuttingProxy, syncOnce, withTarget } from "./harness";
import { expectCopyEqualsSource, hygieneOrg, syncClientStack } from "./shared";

describe("sync client: failures end in a correct copy", () => {
  const stack = syncClientStack();
  it("a renamed form: the old tables are kept and marked retired, the new keys are read from page one", async () => {
    const { org, form } = await hygieneOrg(stack.e2e);
    const db = await stack.target("postgres");
    expect((await syncOnce(stack.e2e.baseUrl, org.secret, db.url)).summary.failed).toEqual([]);
    await org.apply({ forms: [form("Hygiene Walk")] });
    await org.waitForDataset("hygiene_walk__items");
    const after = await syncOnce(stack.e2e.baseUrl, org.secret, db.url);
    expect(after.summary.failed).toEqual([]);
    expect(after.summary.retired.sort()).toEqual(["hygiene_round", "hygiene_round__items"]);
    const state = await withTarget(db.url, (t) => t.loadState());
    expect(state.datasets.get("hygiene_round")?.retiredAt).toBeTruthy();
    expect(state.datasets.get("hygiene_walk")?.retiredAt).toBeNull();
    // Nothing is dropped: the retired copy keeps its rows.
    expect(await withTarget(db.url, (t) => t.countRows("hygiene_round"))).toBe(2);
    await expectCopyEqualsSource(org, db);
  }, 90_000);

  it("a 404 on export while the listing answers: the listing is re-read, the old key retired, the new key read from page one", async () => {
    const { org, form } = await hygieneOrg(stack.e2e);
    const db = await stack.target("postgres");
    expect((await syncOnce(stack.e2e.baseUrl, org.secret, db.url)).summary.failed).toEqual([]);
    // The rename lands between the engine's listing and its first CSV request.
    let renamed = false;
    class RenamingClient extends ExportApiClient {
      override async listing(etag?: string) {
        const result = await super.listing(etag);
        if (!renamed) {
          renamed = true;
          await org.apply({ forms: [form("Hygiene Walk")] });
          await org.waitForDataset("hygiene_walk__items");
        }
        return result;
      }
    }
    const client = new RenamingClient({ baseUrl: stack.e2e.baseUrl, apiKey: org.secret });
    const target = openTarget(db.url);
    await target.open({ writer: true });
    try {
      // fullEveryMs 0: every dataset is asked for, so the stale listing's old keys answer 404.
      const summary = await new SyncEngine(client, target, { fullEveryMs: 0, concurrency: 2 }).runOnce();
      expect(summary.failed).toEqual([]);
      expect(summary.retired.sort()).toEqual(["hygiene_round", "hygiene_round__items"]);
      expect(summary.synced).toEqual(expect.arrayContaining(["hygiene_walk", "hygiene_walk__items"]));
    } finally {
      await target.close();
      await client.close();
    }
    await expectCopyEqualsSource(org, db);
  }, 90_000);

  it("a publish that adds a column in the middle of a backfill: the column is added, the copy equals the source", async () => {
    const { org, form, id, submission } = await hygieneOrg(stack.e2e);
    const db = await stack.target("postgres");
    const stop = new AbortController();
    const first = await syncOnce(stack.e2e.baseUrl, org.secret, db.url, {
      limit: 1,
      only: ["hygiene_round"],
      signal: stop.signal,
      onEvent: (e) => {
        if (e.event === "page" && e.dataset === "hygiene_round") stop.abort();
      },
    });
    expect(first.summary.stopped).toBe(true);
    expect(await withTarget(db.url, async (t) => (await t.loadState()).datasets.get("hygiene_round")?.inProgress)).toBe(true);
    await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:note"), "note", "Note")])] });
    await org.apply({ submissions: [{ ...submission(2, { area: "Packing", score: 9, items: [{ item: "belt" }] }), values: { area: "Packing", score: 9, note: "checked", items: [{ item: "belt" }] } }] });
    await waitFor("the note exported", async () => (await org.page("hygiene_round")).rows.some((r) => r.note === "checked"));
    const resumed = await syncOnce(stack.e2e.baseUrl, org.secret, db.url, { limit: 1 });
    expect(resumed.summary.failed).toEqual([]);
    expect((await copyRows(db, "hygiene_round", ["id", "note"])).find((r) => r.id === id("sub:2"))?.note).toBe("checked");
    await expectCopyEqualsSource(org, db);
  }, 90_000);

  it("DATASET_NOT_EXPORTABLE on one dataset is reported; the other datasets are synced", async () => {
    const { org, form, id } = await hygieneOrg(stack.e2e);
    const db = await stack.target("postgres");
    expect((await syncOnce(stack.e2e.baseUrl, org.secret, db.url)).summary.failed).toEqual([]);
    try {
      await org.apply({ sites: [site(id("site"), "Main Site", "")] });
      await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:extra"), "extra", "Extra")])], suppliers: [{ id: id("sup:3"), name: "Initech" }] });
      await waitFor("hygiene_round to become not exportable", async () => {
        const res = await org.get(csvPath("hygiene_round"));
        await res.arrayBuffer();
        return res.status === 503;
      });
      // A blocked rebuild need not move the token: a full re-read makes the client ask for every dataset.
      const blocked = await syncOnce(stack.e2e.baseUrl, org.secret, db.url, { fullEveryMs: 0 });
      expect(blocked.summary.failed.map((f) => [f.dataset, f.errorCode])).toEqual(expect.arrayContaining([["hygiene_round", "DATASET_NOT_EXPORTABLE"]]));
      expect(blocked.summary.synced).toContain("resources_suppliers");
      expect((await copyRows(db, "resources_suppliers", ["id"])).map((r) => r.id)).toContain(id("sup:3"));
      const state = await withTarget(db.url, (t) => t.loadState());
      expect(state.datasets.get("hygiene_round")?.lastError?.errorCode).toBe("DATASET_NOT_EXPORTABLE");
    } finally {
      await org.apply({ sites: [site(id("site"), "Main Site", "Europe/Berlin")] });
    }
    await waitFor("hygiene_round to export again", async () => {
      const res = await org.get(csvPath("hygiene_round"));
      await res.arrayBuffer();
      return res.status === 200 && (await org.dataset("hygiene_round"))!.columns.some((c) => c.key === "extra");
    });
    const recovered = await syncOnce(stack.e2e.baseUrl, org.secret, db.url);
    expect(recovered.summary.failed).toEqual([]);
    expect((await withTarget(db.url, (t) => t.loadState())).datasets.get("hygiene_round")?.lastError).toBeNull();
    await expectCopyEqualsSource(org, db);
  }, 120_000);

  describe("aborted streams", () => {
    async function bigSuppliers() {
      const { org, id } = await hygieneOrg(stack.e2e);
      // About 300 KiB of suppliers: a page well past the first 64 KiB.
      const long = "x".repeat(1500) + ',"quoted"\nline';
      await org.apply({ suppliers: Array.from({ length: 200 }, (_, i) => ({ id: id(`big:${i}`), name: `Supplier ${i}`, description: `${i} ${long}` })) });
      return org;
    }

    it("a stream aborted after the first 64 KiB is retried from the same cursor and ends in a correct copy", async () => {
      const org = await bigSuppliers();
      const proxy = await startCuttingProxy(Number(new URL(stack.e2e.baseUrl).port), 65_536 + 1000);
      try {
        const db = await stack.target("postgres");
        proxy.state.faults = 2;
        const retries: string[] = [];
        const run = await syncOnce(proxy.baseUrl, org.secret, db.url, { onEvent: (e) => e.event === "page-retry" && retries.push(e.dataset) });
        expect(proxy.state.cuts).toBe(2);
        expect(retries).toEqual(["resources_suppliers", "resources_suppliers"]);
        expect(run.summary.failed).toEqual([]);
        await expectCopyEqualsSource(org, db);
      } finally {
        await proxy.close();
      }
    }, 90_000);

    it("a stream that aborts on every attempt is reported after a bounded number of attempts; the other datasets are synced", async () => {
      const org = await bigSuppliers();
      const proxy = await startCuttingProxy(Number(new URL(stack.e2e.baseUrl).port), 65_536 + 1000);
      try {
        const db = await stack.target("postgres");
        proxy.state.faults = 1000;
        const run = await syncOnce(proxy.baseUrl, org.secret, db.url, { retry: { pageAttempts: 3 } });
        expect(proxy.state.cuts).toBe(3);
        expect(run.summary.failed.map((f) => f.dataset)).toEqual(["resources_suppliers"]);
        expect(run.summary.failed[0].message).toMatch(/without a clean end of body/);
        expect(run.summary.synced).toContain("hygiene_round");
        // The failed page left nothing behind.
        expect(await withTarget(db.url, (t) => t.countRows("resources_suppliers"))).toBe(0);
      } finally {
        await proxy.close();
      }
    }, 90_000);
  });

  it("429s from low rate limits: the client waits Retry-After and ends with a correct copy", async () => {
    // Both limits low: one request in flight (two datasets at once always collide) and 6 per second.
    const limited = await startE2E({ env: { RATE_LIMIT_PER_WINDOW: "6", RATE_LIMIT_WINDOW_SECONDS: "1", RATE_LIMIT_CONCURRENCY: "1" } });
    try {
      const db = await stack.target("postgres");
      const run = await syncOnce(limited.baseUrl, limited.apiKey, db.url, { limit: 20, concurrency: 2 });
      expect(run.summary.failed).toEqual([]);
      expect(run.retries.filter((r) => r.status === 429).length).toBeGreaterThan(0);
      const demo = {
        listing: async () => (await (await stack.e2e.get("/v1/datasets")).json()) as any[],
        page: async (key: string, params: Record<string, string | number | undefined> = {}) => {
          const { parseCsvPage } = await import("../../support/csv");
          const res = await stack.e2e.get(csvPath(key, params));
          return parseCsvPage(Buffer.from(await res.arrayBuffer()));
        },
      };
      await expectCopyEqualsSource(demo, db);
    } finally {
      await limited.stop();
    }
  }, 180_000);
});
