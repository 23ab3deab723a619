import { randomUUID } from "node:crypto";
import { ensureRegistryCurrent, loadCurrentRegistryEntry, loadRegistry, loadRegistryEntry } from "@exportsvc/datasets";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { insertFormDataset } from "./support";

describe("registry readers", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("ensureRegistryCurrent syncs when the registry is empty or a sync is queued, and only then", async () => {
    // An organization without export set-up: no trigger queues it, so no queue worker touches it.
    const org = randomUUID();
    const calls: string[] = [];
    const sync = async (id: string) => {
      calls.push(id);
    };
    await ensureRegistryCurrent(pool, org, sync);
    expect(calls).toEqual([org]);

    await insertFormDataset(pool, org, { key: "form_a", kind: "submission", displayName: "Form A" });
    await ensureRegistryCurrent(pool, org, sync);
    expect(calls).toEqual([org]);

    // A queued sync, visible only inside this transaction (no worker can take it away meanwhile).
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO registry_sync_queue (organization_id) VALUES ($1)", [org]);
      await ensureRegistryCurrent(client, org, sync);
      expect(calls).toEqual([org, org]);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });

  it("loadCurrentRegistryEntry: the same sync rule and entry as ensureRegistryCurrent + loadRegistryEntry, in one statement when current", async () => {
    const org = randomUUID();
    const calls: string[] = [];
    const sync = async (id: string) => {
      calls.push(id);
      // The sync writes the registry, as SyncDatasets does; the entry is read after it.
      if (!(await loadRegistryEntry(pool, id, "form_a"))) await insertFormDataset(pool, id, { key: "form_a", kind: "submission", displayName: "Form A" });
    };
    const first = await loadCurrentRegistryEntry(pool, org, "form_a", sync);
    expect(calls).toEqual([org]);
    expect(first?.key).toBe("form_a");
    expect(await loadCurrentRegistryEntry(pool, org, "form_a", sync)).toEqual(await loadRegistryEntry(pool, org, "form_a"));
    expect(await loadCurrentRegistryEntry(pool, org, "missing", sync)).toBeUndefined();
    expect(calls).toEqual([org]);

    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO registry_sync_queue (organization_id) VALUES ($1)", [org]);
      expect((await loadCurrentRegistryEntry(client, org, "form_a", sync))?.key).toBe("form_a");
      expect(calls).toEqual([org, org]);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });

  it("propagates a failing sync", async () => {
    const org = randomUUID();
    await expect(ensureRegistryCurrent(pool, org, async () => Promise.reject(new Error("schema down")))).rejects.toThrow("schema down");
  });

  it("loads live entries with their change counter, never retired ones", async () => {
    const org = await createTestOrganization(pool);
    await insertFormDataset(pool, org, { key: "live", kind: "submission", displayName: "Live" });
    await insertFormDataset(pool, org, { key: "gone", kind: "submission", displayName: "Gone", state: "retired" });
    await pool.query("INSERT INTO dataset_changes (organization_id, dataset, version) VALUES ($1, 'live', 7)", [org]);
    const entries = await loadRegistry(pool, org);
    expect(entries.map((e) => e.key)).toEqual(["live"]);
    expect(entries[0]).toEqual(
      expect.objectContaining({ key: "live", kind: "submission", displayName: "Live", generation: 1, state: "ready", changeCounter: "7" }),
    );
    expect(entries[0].parentKey).toBeUndefined();
    expect(await loadRegistryEntry(pool, org, "gone")).toBeUndefined();
    expect((await loadRegistryEntry(pool, org, "live"))?.tableName).toBe("form_ds.t_live");
    expect(await loadRegistryEntry(pool, randomUUID(), "live")).toBeUndefined();
  });
});
