import { createTestOrganization, testPool } from "../../../test/support/db";
import type { RunningSchemaService } from "../src";
import { addAttribute, eventually, registryRows, startSchemaService } from "./support";

describe("registry sync queue", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("is filled by attribute changes and organization set-up, once per organization", async () => {
    const org = await createTestOrganization(pool);
    const queued = async () =>
      (await pool.query("SELECT requested_at FROM registry_sync_queue WHERE organization_id = $1", [org])).rows;
    expect(await queued()).toHaveLength(1);
    await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
    const id = await addAttribute(pool, org, { kind: "suppliers", key: "a" });
    await addAttribute(pool, org, { kind: "suppliers", key: "b" });
    expect(await queued()).toHaveLength(1);
    await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
    await pool.query("UPDATE custom_attribute_definitions SET name = 'A' WHERE organization_id = $1 AND id = $2", [org, id]);
    expect(await queued()).toHaveLength(1);
    await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
    await pool.query("DELETE FROM custom_attribute_definitions WHERE organization_id = $1 AND id = $2", [org, id]);
    expect(await queued()).toHaveLength(1);
  });

  describe("worker", () => {
    let service: RunningSchemaService;
    beforeAll(async () => {
      // Polling is off (10 minutes): only NOTIFY can wake the worker within the test.
      service = await startSchemaService();
      await eventually("listener connected", async () => service.worker.listening);
    });
    afterAll(() => service.stop());

    it("syncs an organization as soon as its attributes change (NOTIFY) and clears its queue row", async () => {
      const org = await createTestOrganization(pool);
      await eventually("organization set-up synced", async () => (await registryRows(pool, org)).size === 12);
      await addAttribute(pool, org, { kind: "recipes", key: "Allergen Notes", name: "Allergen notes" });
      await eventually("attribute column registered", async () => {
        const recipes = (await registryRows(pool, org)).get("resources_recipes");
        return recipes?.columns.at(-1)?.key === "allergen_notes";
      });
      await eventually(
        "queue row removed",
        async () => (await pool.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1", [org])).rowCount === 0,
      );
    });
  });

  describe("listener connection", () => {
    it("re-establishes LISTEN after losing its connection and keeps reacting to NOTIFY", async () => {
      const service = await startSchemaService();
      try {
        await eventually("listener connected", async () => service.worker.listening);
        const firstPid = service.worker.listenerBackendPid!;
        expect(firstPid).toEqual(expect.any(Number));
        await pool.query("SELECT pg_terminate_backend($1)", [firstPid]);
        await eventually("listener reconnected", async () => service.worker.listening && service.worker.listenerBackendPid !== firstPid);
        const org = await createTestOrganization(pool);
        await eventually("organization synced after reconnect", async () => (await registryRows(pool, org)).size === 12);
      } finally {
        await service.stop();
      }
    });
  });

  describe("polling fallback", () => {
    it("processes rows queued while no listener heard them", async () => {
      const org = await createTestOrganization(pool);
      const service = await startSchemaService({ REGISTRY_POLL_MS: "100" });
      try {
        await eventually("queued organization synced by polling", async () => (await registryRows(pool, org)).size === 12);
        await eventually(
          "queue row removed",
          async () => (await pool.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1", [org])).rowCount === 0,
        );
      } finally {
        await service.stop();
      }
    });
  });
});
