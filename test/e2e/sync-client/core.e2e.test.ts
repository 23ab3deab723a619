/**
 * The sync client against the real stack (services as processes, real PostgreSQL): a full sync
 * equals the source in PostgreSQL and SQLite; an unchanged organization costs one listing request;
 * edits, new submissions, removed grid rows and deleted resources reach the copy.
 */
import { waitFor } from "../../support/forms";
import { ExportApiClient, verify, type VerifyResult } from "../../../packages/sync-client/src";
import { copyRows, execOnCopy, hasUniqueKey, syncOnce, withTarget, TARGET_KINDS, type TargetDb } from "./harness";
import { expectCopyEqualsSource, hygieneOrg, syncClientStack } from "./shared";

describe("sync client: core loader rules", () => {
  const stack = syncClientStack();

  const demoOrg = () => ({
    listing: async () => (await (await stack.e2e.get("/v1/datasets")).json()) as any[],
    page: async (key: string, params: Record<string, string | number | undefined> = {}) => {
      const qs = new URLSearchParams();
      for (const [k, v] of Object.entries(params)) if (v !== undefined) qs.set(k, String(v));
      const res = await stack.e2e.get(`/v1/datasets/${key}/csv?${qs}`);
      const { parseCsvPage } = await import("../../support/csv");
      return parseCsvPage(Buffer.from(await res.arrayBuffer()));
    },
  });

  it.each(TARGET_KINDS)("a full sync of the demo organization into %s equals the source; a second sync costs one listing request", async (kind) => {
    const db = await stack.target(kind);
    const first = await syncOnce(stack.e2e.baseUrl, stack.e2e.apiKey, db.url, { limit: 7 });
    expect(first.summary.failed).toEqual([]);
    expect(first.summary.synced.length).toBeGreaterThan(10);
    expect(first.summary.rows).toBeGreaterThan(0);
    await expectCopyEqualsSource(demoOrg(), db);
    const again = await syncOnce(stack.e2e.baseUrl, stack.e2e.apiKey, db.url, { limit: 7 });
    expect(again.summary.listing).toBe("not-modified");
    expect({ listings: again.listings, pages: again.pages }).toEqual({ listings: 1, pages: 0 });
  }, 180_000);

  it.each(TARGET_KINDS)("%s: verify finds every dataset of a fresh copy equal, value by value, and names each tampered row", async (kind) => {
    const db = await stack.target(kind);
    expect((await syncOnce(stack.e2e.baseUrl, stack.e2e.apiKey, db.url)).summary.failed).toEqual([]);
    const runVerify = async () => {
      const client = new ExportApiClient({ baseUrl: stack.e2e.baseUrl, apiKey: stack.e2e.apiKey });
      try {
        return await withTarget(db.url, (target) => verify(client, target));
      } finally {
        await client.close();
      }
    };
    const clean = await runVerify();
    // The demo organization has every column type (numbers, booleans, dates, timestamps, grids):
    // converted as a sync stores them, none differs.
    expect(clean.length).toBeGreaterThan(10);
    expect(clean.filter((r) => !r.ok)).toEqual([]);
    expect(clean.find((r) => r.dataset === "resources_suppliers")!.source.rows).toBeGreaterThan(2);

    const ids = (await copyRows(db, "resources_suppliers", ["id"])).map((r) => r.id!).sort();
    const [changed, removed, source] = ids;
    await execOnCopy(
      db,
      `UPDATE resources_suppliers SET name = 'tampered' WHERE id = '${changed}';
       DELETE FROM resources_suppliers WHERE id = '${removed}';
       INSERT INTO resources_suppliers (id, name, last_modified) SELECT '00000000-0000-4000-8000-00000000e7a1', name, last_modified FROM resources_suppliers WHERE id = '${source}';`,
    );
    const dirty = await runVerify();
    expect(dirty.filter((r) => !r.ok).map((r) => r.dataset)).toEqual(["resources_suppliers"]);
    const suppliers = dirty.find((r) => r.dataset === "resources_suppliers") as VerifyResult;
    expect(suppliers).toMatchObject({ ok: false, missing: 1, extra: 1, changed: 1, duplicated: 0, missingColumns: [] });
    expect(suppliers.copy!.rows).toBe(suppliers.source.rows);
    expect(suppliers.examples).toEqual([`changed id=${changed} (name)`, "extra id=00000000-0000-4000-8000-00000000e7a1", `missing id=${removed}`]);
  }, 180_000);

  it.each(TARGET_KINDS)("%s: a product deleted and restored under its id, or loaded after a lot naming it: the lot shows its name after the next sync", async (kind) => {
    const { id, org } = await hygieneOrg(stack.e2e);
    const db = await stack.target(kind);
    const run = () => syncOnce(stack.e2e.baseUrl, org.secret, db.url);
    const product = { id: id("prod:flour"), name: "Flour", productType: "RawMaterial" as const };
    const lotName = async () => (await copyRows(db, "resources_lots", ["id", "product_name"])).find((r) => r.id === id("lot:1"))?.product_name ?? null;
    const exported = (name: string) => async () => (await org.page("resources_lots")).rows.some((r) => r.id === id("lot:1") && r.product_name === name);

    await org.apply({ products: [product], lots: [{ id: id("lot:1"), code: "L-1", productId: product.id }] });
    await waitFor("the lot exported", exported("Flour"));
    expect((await run()).summary.failed).toEqual([]);
    expect(await lotName()).toBe("Flour");

    // Deleted: the lot keeps the id and shows an empty name (the lot reaches the rewrite feed, 120).
    await org.apply({ delete: { products: [product.id] } });
    await waitFor("the empty name exported", exported(""));
    expect((await run()).summary.failed).toEqual([]);
    expect(await lotName()).toBeNull();

    // Restored under the same id: the name is back without the lot's last_modified moving (110).
    await org.apply({ products: [product] });
    await waitFor("the name exported again", exported("Flour"));
    expect((await run()).summary.failed).toEqual([]);
    expect(await lotName()).toBe("Flour");

    // A lot loaded before its product by a writer that does not check references (exportctl apply
    // refuses them), synced with the empty name, then the product.
    await stack.e2e.pool.query("INSERT INTO lots (organization_id, id, code, product_id) VALUES ($1, $2, 'L-2', $3)", [org.organizationId, id("lot:2"), id("prod:salt")]);
    await waitFor("the second lot exported", async () => (await org.page("resources_lots")).rows.some((r) => r.id === id("lot:2")));
    expect((await run()).summary.failed).toEqual([]);
    const secondLotName = async () => (await copyRows(db, "resources_lots", ["id", "product_name"])).find((r) => r.id === id("lot:2"))?.product_name ?? null;
    expect(await secondLotName()).toBeNull();
    await org.apply({ products: [{ id: id("prod:salt"), name: "Salt" }] });
    await waitFor("the second lot's product name exported", async () => (await org.page("resources_lots")).rows.some((r) => r.id === id("lot:2") && r.product_name === "Salt"));
    expect((await run()).summary.failed).toEqual([]);
    expect(await secondLotName()).toBe("Salt");
  }, 120_000);

  it.each(TARGET_KINDS)("%s: an edit, a new submission, a removed grid row reach the copy; a deleted resource goes at once (deletion feed)", async (kind) => {
    const { id, org, submission } = await hygieneOrg(stack.e2e);
    const db = await stack.target(kind);
    const run = (opts = {}) => syncOnce(stack.e2e.baseUrl, org.secret, db.url, { limit: 2, ...opts });
    expect((await run()).summary.failed).toEqual([]);
    await expectCopyEqualsSource(org, db);

    const gridBefore = (await org.page("hygiene_round__items")).rows.length;
    await org.apply({
      submissions: [
        submission(1, { area: "Bakery", score: 3, items: [{ item: "floor" }, { item: "walls" }] }),
        submission(3, { area: "Dock", score: 5, items: [{ item: "ramp" }] }),
      ],
      delete: { suppliers: [id("sup:2")] },
    });
    await waitFor("the edit exported", async () => {
      const items = (await org.page("hygiene_round__items")).rows;
      return items.length === gridBefore && items.some((r) => r.item === "ramp") && !items.some((r) => r.item === "ceiling");
    });
    const incremental = await run();
    expect(incremental.summary.failed).toEqual([]);
    expect(incremental.summary.synced).toEqual(expect.arrayContaining(["hygiene_round", "hygiene_round__items"]));
    // The grid copy lost its third row of submission 1 (renumbered export), the rest is equal.
    const grid = await copyRows(db, "hygiene_round__items", ["id", "row_index", "item"]);
    expect(grid.filter((r) => r.id === id("sub:1")).map((r) => [r.row_index, r.item]).sort()).toEqual([["1", "floor"], ["2", "walls"]]);
    const subs = await copyRows(db, "hygiene_round", ["id", "score"]);
    expect(subs.find((r) => r.id === id("sub:1"))?.score).toBe("3");
    expect(subs.map((r) => r.id)).toContain(id("sub:3"));
    // The deletion feed removed the supplier in the incremental sync.
    expect((await copyRows(db, "resources_suppliers", ["id"])).map((r) => r.id)).not.toContain(id("sup:2"));
    // The scheduled full re-read still runs and finds the copy exact.
    const full = await run({ fullEveryMs: 0 });
    expect(full.summary.failed).toEqual([]);
    await expectCopyEqualsSource(org, db);
    // The state records the full read.
    const state = await withTarget(db.url, (t) => t.loadState());
    expect(state.datasets.get("resources_suppliers")?.lastFullReadAt).toBeTruthy();
    expect(state.datasets.get("resources_suppliers")?.inProgress).toBe(false);
  }, 120_000);
  it.each(TARGET_KINDS)("%s: a grid synced on its own (no root table to compare with) drops the grid rows a submission lost", async (kind) => {
    const { id, org, submission } = await hygieneOrg(stack.e2e);
    const db = await stack.target(kind);
    const run = () => syncOnce(stack.e2e.baseUrl, org.secret, db.url, { limit: 2, only: ["hygiene_round__items"] });
    expect((await run()).summary.failed).toEqual([]);
    expect((await copyRows(db, "hygiene_round__items", ["id"])).length).toBe(4);
    await org.apply({ submissions: [submission(1, { area: "Bakery", score: 3, items: [{ item: "floor" }, { item: "walls" }] })] });
    await waitFor("the edit exported", async () => !(await org.page("hygiene_round__items")).rows.some((r) => r.item === "ceiling"));
    const again = await run();
    expect(again.summary.failed).toEqual([]);
    const grid = await copyRows(db, "hygiene_round__items", ["id", "row_index", "item"]);
    expect(grid.filter((r) => r.id === id("sub:1")).map((r) => [r.row_index, r.item]).sort()).toEqual([["1", "floor"], ["2", "walls"]]);
    expect(grid.filter((r) => r.id === id("sub:2")).map((r) => [r.row_index, r.item])).toEqual([["1", "belt"]]);
  }, 120_000);
  it.each(TARGET_KINDS)(
    "%s: a first sync appends into the empty table; a submission edited meanwhile re-appears on a later page and its grid rows are replaced as a set; a full read of a stored table upserts",
    async (kind) => {
      const { id, org, submission } = await hygieneOrg(stack.e2e);
      const db = await stack.target(kind);
      const grid = "hygiene_round__items";
      const items = async () => (await copyRows(db, grid, ["id", "row_index", "item"])).map((r) => [r.id, r.row_index, r.item]).sort();
      const repeated = (cursors: Array<string | null>) => cursors.length - new Set(cursors).size;
      // Once the first page is stored, submission 1 loses a grid row: its new version comes after both submissions' old rows.
      let edited = false;
      const first = await syncOnce(stack.e2e.baseUrl, org.secret, db.url, {
        limit: 2,
        only: [grid],
        beforePage: async (cursor) => {
          if (cursor === null || edited) return;
          edited = true;
          await org.apply({ submissions: [submission(1, { area: "Bakery", score: 3, items: [{ item: "floor" }, { item: "walls" }] })] });
          await waitFor("the edit exported", async () => !(await org.page(grid)).rows.some((r) => r.item === "ceiling"));
        },
      });
      expect(first.summary.failed).toEqual([]);
      expect(edited).toBe(true);
      // No page is read twice: PostgreSQL and SQLite deferred the table's key and DuckDB appends
      // without one; each stored the new version beside the old rows and kept each key's latest
      // rows (a grid submission's as a set) when the read ended.
      expect(repeated(first.cursors)).toBe(0);
      if (kind !== "duckdb") expect(await hasUniqueKey(db, grid)).toBe(true);
      expect(await items()).toEqual(
        [
          [id("sub:1"), "1", "floor"],
          [id("sub:1"), "2", "walls"],
          [id("sub:2"), "1", "belt"],
        ].sort(),
      );

      // A full read of the stored table upserts from its first page (nothing is read twice) and trims as before.
      await org.apply({ submissions: [submission(2, { area: "Packing", score: 9, items: [] })] });
      await waitFor("the emptied grid exported", async () => !(await org.page(grid)).rows.some((r) => r.item === "belt"));
      await org.apply({ submissions: [submission(1, { area: "Bakery", score: 4, items: [{ item: "door" }] })] });
      await waitFor("the second edit exported", async () => (await org.page(grid)).rows.some((r) => r.item === "door"));
      const full = await syncOnce(stack.e2e.baseUrl, org.secret, db.url, { limit: 2, only: [grid], fullEveryMs: 0 });
      expect(full.summary.failed).toEqual([]);
      expect(repeated(full.cursors)).toBe(0);
      expect(await items()).toEqual([[id("sub:1"), "1", "door"]]);
    },
    120_000,
  );

  const stateCursorSet = (db: TargetDb, dataset: string, cursor: string) =>
    db.kind === "postgres"
      ? `UPDATE dataset_sync.datasets SET state = jsonb_set(state, '{cursor}', '"${cursor}"') WHERE dataset_key = '${dataset}'`
      : `UPDATE "dataset_sync$datasets" SET state = json_set(state, '$.cursor', '${cursor}') WHERE dataset_key = '${dataset}'`;

  it.each(["postgres", "sqlite"] as const)(
    "%s: a first backfill defers the table's key; stopped between pages it resumes appending (a row edited meanwhile stored once, newest), or restarted as a full read it builds the key before its first upsert",
    async (kind) => {
      const { id, org } = await hygieneOrg(stack.e2e);
      await org.apply({ suppliers: Array.from({ length: 30 }, (_, i) => ({ id: id(`more:${i}`), name: `Supplier ${i}` })) });
      await waitFor("the suppliers exported", async () => (await org.page("resources_suppliers", { limit: 100 })).rows.length === 32);
      const suppliers = "resources_suppliers";
      const stopAfter = (pages: number) => {
        const stop = new AbortController();
        let opened = 0;
        return { signal: stop.signal, beforePage: async () => void (++opened > pages && stop.abort()) };
      };
      const names = async (db: TargetDb) => (await copyRows(db, suppliers, ["id", "name"])).map((r) => [r.id, r.name]).sort();
      const notSynced = (await org.listing()).map((d) => d.key).filter((key) => key !== suppliers);

      // Stopped after two pages: the pages are in the table, which has no key yet.
      const resumed = await stack.target(kind);
      const stopped = await syncOnce(stack.e2e.baseUrl, org.secret, resumed.url, { limit: 5, only: [suppliers], ...stopAfter(2) });
      expect(stopped.summary.stopped).toBe(true);
      const committed = (await copyRows(resumed, suppliers, ["id"])).length;
      expect(committed).toBeGreaterThanOrEqual(10);
      expect(committed).toBeLessThan(32);
      expect(await hasUniqueKey(resumed, suppliers)).toBe(false);
      expect((await withTarget(resumed.url, (t) => t.loadState())).datasets.get(suppliers)).toMatchObject({ inProgress: true, appending: true });
      // A supplier of the first page renamed: it is served again on a later page of the resumed read.
      await org.apply({ suppliers: [{ id: id("sup:1"), name: "Acme Renamed" }] });
      await waitFor("the rename exported", async () => (await org.page(suppliers, { limit: 100 })).rows.some((r) => r.name === "Acme Renamed"));
      const resume = await syncOnce(stack.e2e.baseUrl, org.secret, resumed.url, { limit: 5, only: [suppliers] });
      expect(resume.summary.failed).toEqual([]);
      expect(resume.cursors.length - new Set(resume.cursors).size).toBe(0);
      expect(await hasUniqueKey(resumed, suppliers)).toBe(true);
      const copied = await names(resumed);
      expect(copied.length).toBe(32);
      expect(copied.filter(([key]) => key === id("sup:1"))).toEqual([[id("sup:1"), "Acme Renamed"]]);
      await expectCopyEqualsSource(org, resumed, notSynced);

      // Stopped again on a fresh copy, then its stored cursor refused (400 INVALID_CURSOR): the read
      // restarts from the beginning upserting into the rows already stored, so the key comes first.
      const restarted = await stack.target(kind);
      expect((await syncOnce(stack.e2e.baseUrl, org.secret, restarted.url, { limit: 5, only: [suppliers], ...stopAfter(2) })).summary.stopped).toBe(true);
      expect(await hasUniqueKey(restarted, suppliers)).toBe(false);
      await execOnCopy(restarted, stateCursorSet(restarted, suppliers, "not-a-cursor"));
      const events: string[] = [];
      const full = await syncOnce(stack.e2e.baseUrl, org.secret, restarted.url, { limit: 5, only: [suppliers], onEvent: (e) => e.event === "full-read" && events.push(e.reason) });
      expect(full.summary.failed).toEqual([]);
      expect(events).toEqual(["INVALID_CURSOR on the stored cursor"]);
      expect(await hasUniqueKey(restarted, suppliers)).toBe(true);
      expect(await names(restarted)).toEqual(copied);
      await expectCopyEqualsSource(org, restarted, notSynced);
    },
    120_000,
  );
});
