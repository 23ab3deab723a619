import { createTestOrganization, testPool } from "../../../test/support/db";
import { randomUUID } from "node:crypto";
import type { RunningSchemaService } from "../src";
import { requeueOnDefinitionsChange } from "../src";
import { addAttribute, eventually, registryRows, startSchemaService } from "./support";

describe("registry sync queue", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  // Each change runs in a transaction that is rolled back: its queue row is visible only there, so no
  // queue worker of a parallel suite can take it away before the assertion.
  it("is filled by attribute changes and organization set-up, once per organization", async () => {
    const org = await createTestOrganization(pool);
    const attribute = await addAttribute(pool, org, { kind: "suppliers", key: "a" });
    const queuedWithin = async (change: string, params: unknown[]) => {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [org]);
        await client.query(change, params);
        return (await client.query("SELECT organization_id FROM registry_sync_queue WHERE organization_id = $1", [org])).rowCount;
      } finally {
        await client.query("ROLLBACK");
        client.release();
      }
    };
    expect(
      await queuedWithin(
        "INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type) VALUES ($1, gen_random_uuid(), 'lots', 'x', 'X', 'Text'), ($1, gen_random_uuid(), 'lots', 'y', 'Y', 'Text')",
        [org],
      ),
    ).toBe(1);
    expect(await queuedWithin("UPDATE custom_attribute_definitions SET name = 'A' WHERE organization_id = $1 AND id = $2", [org, attribute])).toBe(1);
    expect(await queuedWithin("DELETE FROM custom_attribute_definitions WHERE organization_id = $1 AND id = $2", [org, attribute])).toBe(1);
    expect(await queuedWithin("UPDATE custom_attribute_definitions SET name = 'A' WHERE false", [])).toBe(0);
  });

  it("queues an organization when it is set up for export", async () => {
    const org = randomUUID();
    await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'new')", [org]);
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true)", [org]);
      const queued = await client.query("SELECT 1 FROM registry_sync_queue WHERE organization_id = $1", [org]);
      expect(queued.rowCount).toBe(1);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });

  it("queues every organization once when the code's dataset definitions change", async () => {
    const org = await createTestOrganization(pool);
    const name = `test-definitions-${randomUUID()}`;
    expect(await requeueOnDefinitionsChange(pool, name, "v1")).toContain(org);
    expect(await requeueOnDefinitionsChange(pool, name, "v1")).toEqual([]);
    expect(await requeueOnDefinitionsChange(pool, name, "v2")).toContain(org);
    const stored = await pool.query("SELECT fingerprint FROM registry_definitions WHERE name = $1", [name]);
    expect(stored.rows).toEqual([{ fingerprint: "v2" }]);
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
