/**
 * The sync client follows the deletion feed and the rewrite signal (issue 11 item 4), against the
 * real stack, into PostgreSQL and SQLite: deleted rows leave the copy on the next incremental sync
 * without a full read; a deleted-then-recreated row stays; a rename reaches the copy through the
 * rewrite feed without a full read; a moved rewriteToken (a republish) re-reads exactly the datasets
 * whose token moved.
 */
import type { SyncEvent } from "../../../packages/sync-client/src";
import { field, waitFor } from "../../support/forms";
import { copyRows, syncOnce, withTarget, TARGET_KINDS } from "./harness";
import { expectCopyEqualsSource, hygieneOrg, syncClientStack } from "./shared";

describe("sync client: deletion feed and rewriteToken", () => {
  const stack = syncClientStack();

  /** One sync of the copy in small pages; `events` holds the last run's events only. */
  const recordingSync = (secret: string, target: string) => {
    const events: SyncEvent[] = [];
    const run = async () => {
      events.length = 0;
      const r = await syncOnce(stack.e2e.baseUrl, secret, target, { limit: 2, onEvent: (e) => events.push(e) });
      expect(r.summary.failed).toEqual([]);
      return r;
    };
    return { events, run };
  };

  it.each(TARGET_KINDS)("%s: deletes reach the copy incrementally, a re-created row stays, a moved rewriteToken re-reads only its datasets", async (kind) => {
    const { id, org, form, submission } = await hygieneOrg(stack.e2e);
    const db = await stack.target(kind);
    const { events, run } = recordingSync(org.secret, db.url);
    const fullReads = () => events.filter((e): e is Extract<SyncEvent, { event: "full-read" }> => e.event === "full-read").map((e) => e.dataset).sort();
    const ids = async (table: string) => (await copyRows(db, table, ["id"])).map((r) => r.id);
    // Lots are shown by no other dataset, so deleting one is no rewrite (deleting a supplier is: rows show
    // suppliers by name, so its rewriteToken moves and the datasets are re-read, by design).
    await org.apply({ lots: [{ id: id("lot:1"), code: "L1" }, { id: id("lot:2"), code: "L2" }] });
    await waitFor("the lots exported", async () => (await org.page("resources_lots")).rows.length === 2);
    await run();
    expect(await ids("hygiene_round__items")).toContain(id("sub:2"));
    expect(await ids("resources_lots")).toContain(id("lot:2"));

    // A deleted resource and a deleted submission with its grid rows: gone after an incremental sync.
    await org.apply({ delete: { lots: [id("lot:2")], submissions: [id("sub:2")] } });
    await waitFor("the deletes exported", async () => (await org.page("hygiene_round")).rows.length === 1 && (await org.page("resources_lots")).rows.length === 1);
    const incremental = await run();
    expect(fullReads()).toEqual([]);
    expect(incremental.summary.deleted).toBeGreaterThanOrEqual(3);
    expect(await ids("resources_lots")).not.toContain(id("lot:2"));
    expect(await ids("hygiene_round")).not.toContain(id("sub:2"));
    expect(await ids("hygiene_round__items")).not.toContain(id("sub:2"));
    expect(await ids("hygiene_round__items")).toContain(id("sub:1"));
    await expectCopyEqualsSource(org, db);
    const state = await withTarget(db.url, (t) => t.loadState());
    expect((state.datasets.get("resources_lots")?.extensions.deletions as { cursor: string | null }).cursor).toBeTruthy();

    // Deleted, then re-created with the same id (read by the client only afterwards): kept.
    await org.apply({ delete: { lots: [id("lot:1")] } });
    await org.apply({ lots: [{ id: id("lot:1"), code: "L1 again" }] });
    await waitFor("the re-created lot exported", async () => (await org.page("resources_lots")).rows.some((r) => r.code === "L1 again"));
    await run();
    expect(fullReads()).toEqual([]);
    expect((await copyRows(db, "resources_lots", ["id", "code"])).map((r) => [r.id, r.code])).toEqual([[id("lot:1"), "L1 again"]]);

    // A submission edited to an empty grid: its grid rows are never re-served, and they are older than
    // its new row in the submission dataset, so they go (no full read).
    await org.apply({ submissions: [submission(1, { area: "Bakery", score: 4, items: [] })] });
    await waitFor("the emptied grid exported", async () => (await org.page("hygiene_round__items")).rows.length === 0);
    await run();
    expect(fullReads()).toEqual([]);
    expect(await ids("hygiene_round__items")).toEqual([]);
    await expectCopyEqualsSource(org, db);

    // A related-record rename goes through the rewrite feeds: no rewriteToken moves, no dataset is
    // re-read in full, and the copy shows the new name.
    const tokens = async () => new Map((await org.listing()).map((d) => [d.key, (d as unknown as { rewriteToken: string }).rewriteToken]));
    let before = await tokens();
    await org.apply({ sites: [{ id: id("site"), name: "Main Site renamed", timeZone: "Europe/Berlin" }] });
    await waitFor("the rename exported", async () => (await org.page("hygiene_round")).rows.every((r) => r.site_name === "Main Site renamed"));
    await waitFor("the rename in the rewrite feed", async () => (await (await org.get("/v1/datasets/hygiene_round/rewrites")).text()).includes("Main Site renamed"));
    await run();
    expect(fullReads()).toEqual([]);
    expect(await tokens()).toEqual(before);
    expect((await copyRows(db, "hygiene_round", ["site_name"])).map((r) => r.site_name)).toEqual(["Main Site renamed"]);
    await expectCopyEqualsSource(org, db);
    const rewritten = (await withTarget(db.url, (t) => t.loadState())).datasets.get("hygiene_round")?.extensions["rewrite-feed"] as { cursor: string | null; rowsRewritten: number };
    expect(rewritten.cursor).toBeTruthy();
    expect(rewritten.rowsRewritten).toBeGreaterThanOrEqual(1);

    // A republish of the form moves only its own datasets' tokens: the resources are not re-read.
    before = await tokens();
    await org.apply({ forms: [form("Hygiene Round", [field.text(id("f:note"), "note", "Note")])] });
    await org.waitForDataset("hygiene_round", (d) => d.columns.some((c) => c.key === "note"));
    let after = await waitFor("the republish moved rewriteToken", async () => {
      const t = await tokens();
      return t.get("hygiene_round") !== before.get("hygiene_round") && t;
    });
    const moved = [...after].filter(([k, v]) => before.get(k) !== v).map(([k]) => k).sort();
    expect(moved).not.toContain("resources_lots");
    await run();
    expect(fullReads()).toEqual(moved);
    expect(fullReads()).toContain("hygiene_round");
    await expectCopyEqualsSource(org, db);
  }, 240_000);

  it.each(TARGET_KINDS)("%s: a deletions cursor behind pruned tombstones (410 DELETIONS_CURSOR_EXPIRED) re-reads that dataset in full and restarts the feed", async (kind) => {
    const { id, org } = await hygieneOrg(stack.e2e);
    const db = await stack.target(kind);
    const { events, run } = recordingSync(org.secret, db.url);
    const lots = async () => (await copyRows(db, "resources_lots", ["id"])).map((r) => r.id).sort();
    await org.apply({ lots: [1, 2, 3].map((n) => ({ id: id(`lot:${n}`), code: `L${n}` })) });
    await waitFor("the lots exported", async () => (await org.page("resources_lots")).rows.length === 3);
    await run();
    await org.apply({ delete: { lots: [id("lot:1")] } });
    await waitFor("lot 1 deleted", async () => (await org.page("resources_lots")).rows.length === 2);
    await run();
    expect(await lots()).toEqual([id("lot:2"), id("lot:3")].sort());
    // lot 2 is deleted and its tombstone pruned (as retention would) before the client reads it.
    await org.apply({ delete: { lots: [id("lot:2")] } });
    await waitFor("lot 2 deleted", async () => (await org.page("resources_lots")).rows.length === 1);
    await stack.e2e.pool.query(
      `WITH pruned AS (
         DELETE FROM dataset_tombstones WHERE organization_id = $1 AND scope = 'lots' RETURNING deleted_at, id)
       INSERT INTO dataset_tombstone_watermarks (organization_id, scope, pruned_through_at, pruned_through_id)
       SELECT $1, 'lots', deleted_at, id FROM pruned ORDER BY deleted_at DESC, id DESC LIMIT 1
       ON CONFLICT (organization_id, scope) DO UPDATE SET pruned_through_at = EXCLUDED.pruned_through_at, pruned_through_id = EXCLUDED.pruned_through_id`,
      [org.organizationId],
    );
    await run();
    const fullReads = events.filter((e): e is Extract<SyncEvent, { event: "full-read" }> => e.event === "full-read");
    expect(fullReads.map((e) => [e.dataset, e.reason])).toEqual([["resources_lots", expect.stringContaining("DELETIONS_CURSOR_EXPIRED")]]);
    // The full read's sweep removed what the pruned tombstone would have; the feed restarted without a cursor.
    expect(await lots()).toEqual([id("lot:3")]);
    const state = await withTarget(db.url, (t) => t.loadState());
    const lotsState = state.datasets.get("resources_lots")!;
    expect(lotsState.phase).toBe("incremental");
    expect((lotsState.extensions.deletions as { expiredAt?: string }).expiredAt).toBeTruthy();
    await expectCopyEqualsSource(org, db);
  }, 120_000);
});
