import { randomUUID } from "node:crypto";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { CursorCodec, CursorKeyring } from "../src/cursor";
import { buildPageQuery, type PageDataset } from "../src/sql/page-query";

const codec = new CursorCodec({ keyring: CursorKeyring.parse("1:0123456789abcdef") });

describe("page query in PostgreSQL", () => {
  it("still runs when the planner is pushed to a parallel plan (value conversions catch errors in subtransactions)", async () => {
    const pool = testPool();
    const client = await pool.connect();
    try {
      const org = await createTestOrganization(pool);
      const attr = randomUUID();
      await client.query(
        `INSERT INTO chemicals (organization_id, id, name, attributes) SELECT $1, gen_random_uuid(), 'c' || g, jsonb_build_object($2::text, g || 'x') FROM generate_series(1, 50) g`,
        [org, attr],
      );
      const dataset: PageDataset = {
        key: "resources_chemicals",
        kind: "resource",
        sourceRef: "chemicals",
        shapeFingerprint: "f",
        columns: [
          { key: "id", dataType: "uuid", source: { kind: "core", name: "id" } },
          { key: "n", dataType: "number", source: { kind: "attribute", attributeId: attr, attributeType: "Number" } },
          { key: "d", dataType: "date", source: { kind: "attribute", attributeId: attr, attributeType: "Date" } },
          { key: "t", dataType: "dateTime", source: { kind: "attribute", attributeId: attr, attributeType: "DateTime" } },
        ],
      };
      await client.query("SET force_parallel_mode = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0");
      const { rows } = await client.query(buildPageQuery(dataset, { organizationId: org, limit: 5000 }, codec));
      expect(rows).toHaveLength(50);
      expect(rows.every((r) => r.n === null && r.d === null && r.t === null)).toBe(true);
    } finally {
      client.release(true);
      await pool.end();
    }
  });
});
