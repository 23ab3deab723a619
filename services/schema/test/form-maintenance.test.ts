import { randomUUID } from "node:crypto";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { eventually, registryRows, startSchemaService } from "./support";

describe("form-dataset maintenance in the schema service", () => {
  const pool = testPool();
  afterAll(() => pool.end());

  it("materializes a published form and keeps its dataset current without being called", async () => {
    const org = await createTestOrganization(pool);
    // Restricted to this organization: other suites consume their own organizations' change logs.
    const service = await startSchemaService({ FORM_DATASETS_MAINTENANCE: "true", FORM_DATASETS_POLL_MS: "600000" }, { formMaintenanceOrganizationId: org });
    try {
      const formId = randomUUID();
      await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Daily Check', 'DC')", [org, formId]);
      await pool.query(
        "INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, $3, now())",
        [org, formId, JSON.stringify([{ id: randomUUID(), key: "temperature", label: "Temperature", type: "number" }])],
      );
      await eventually("form dataset built", async () => (await registryRows(pool, org)).get("daily_check")?.columns.some((c) => c.key === "temperature") ?? false);
      const counter = async () =>
        Number((await pool.query("SELECT version FROM dataset_changes WHERE organization_id = $1 AND dataset = 'daily_check'", [org])).rows[0]?.version ?? 0);
      const before = await counter();
      await pool.query(
        `INSERT INTO submissions (organization_id, id, form_id, record_id, status, "values") VALUES ($1, $2, $3, 'DC-1', 'Completed', '{}')`,
        [org, randomUUID(), formId],
      );
      await eventually("submission applied (change counter moved)", async () => (await counter()) > before);
    } finally {
      await service.stop();
    }
  });
});
