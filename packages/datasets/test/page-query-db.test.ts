import { randomUUID } from "node:crypto";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { CursorCodec, CursorKeyring } from "../src/cursor";
import { buildPageQuery, type PageDataset, type SiteNameLookup } from "../src/sql/page-query";
import { dateAttribute, numberAttribute } from "../src/sql/attributes";

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
        columns: [
          { key: "id", dataType: "uuid", source: { kind: "core", name: "id" } },
          { key: "n", dataType: "number", source: { kind: "attribute", attributeId: attr, attributeType: "Number" } },
          { key: "d", dataType: "date", source: { kind: "attribute", attributeId: attr, attributeType: "Date" } },
          { key: "t", dataType: "dateTime", source: { kind: "attribute", attributeId: attr, attributeType: "DateTime" } },
        ],
      };
      // PostgreSQL 16 renamed force_parallel_mode to debug_parallel_query (the embedded server is 17).
      const version = Number((await client.query("SHOW server_version_num")).rows[0].server_version_num);
      const forceParallel = version >= 160000 ? "debug_parallel_query" : "force_parallel_mode";
      await client.query(`SET ${forceParallel} = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0`);
      const { rows } = await client.query(buildPageQuery(dataset, { organizationId: org, limit: 5000 }, codec));
      expect(rows).toHaveLength(50);
      expect(rows.every((r) => r.n === null && r.d === null && r.t === null)).toBe(true);
    } finally {
      client.release(true);
      await pool.end();
    }
  });
});

describe("site names of a submission page in PostgreSQL", () => {
  it("the join and the map give the same text: live names, a deleted or never-stored site empty, no other organization's site", async () => {
    const pool = testPool();
    const schema = `page_sites_${randomUUID().replace(/-/g, "")}`;
    try {
      const [org, other] = [await createTestOrganization(pool), await createTestOrganization(pool)];
      const [plant, renamed, deleted, foreign] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      const site = (o: string, id: string, name: string, path: string) =>
        pool.query("INSERT INTO sites (organization_id, id, name, path) VALUES ($1, $2, $3, $4)", [o, id, name, path]);
      await site(org, plant, 'Plant "North", line 1\nsecond line ✓', "Region / Plant");
      await site(org, renamed, "Old name", "Old path");
      await site(org, deleted, "Gone", "Gone");
      // The same id in another organization must never name this organization's rows.
      await site(other, foreign, "Other organization's site", "Other");
      await site(other, plant, "Other organization's plant", "Other");
      await pool.query(`CREATE SCHEMA ${schema}`);
      await pool.query(`CREATE TABLE ${schema}.t (organization_id uuid NOT NULL, id uuid NOT NULL, last_modified timestamptz NOT NULL, c3 text)`);
      // The site id column holds the uuid's canonical text (render-sql.ts renders it from submissions.site_id).
      const sites = [plant, renamed, deleted, foreign, "", null];
      await pool.query(
        `INSERT INTO ${schema}.t SELECT $1, gen_random_uuid(), now() - (i || ' seconds')::interval, s FROM unnest($2::text[]) WITH ORDINALITY AS u(s, i)`,
        [org, sites],
      );
      await pool.query("UPDATE sites SET name = 'New name', path = 'New path' WHERE organization_id = $1 AND id = $2", [org, renamed]);
      await pool.query("DELETE FROM sites WHERE organization_id = $1 AND id = $2", [org, deleted]);

      const dataset: PageDataset = {
        key: "inspection",
        kind: "submission",
        sourceRef: randomUUID(),
        tableName: `${schema}.t`,
        columns: [
          { key: "id", dataType: "uuid", source: { kind: "table", column: "id" } },
          { key: "site_id", dataType: "uuid", source: { kind: "table", column: "c3" } },
          { key: "site_name", dataType: "text", source: { kind: "table", column: "c4" } },
          { key: "site_path", dataType: "text", source: { kind: "table", column: "c5" } },
        ],
      };
      const page = async (siteNames: SiteNameLookup) =>
        (await pool.query(buildPageQuery(dataset, { organizationId: org, limit: 100, siteNames }, codec))).rows.map((r) => [r.site_id, r.site_name, r.site_path]);
      const map = await page("map");
      expect(map).toEqual(await page("join"));
      const named = new Map(map.map(([id, name, path]) => [id, [name, path]]));
      expect(named.get(plant)).toEqual(['Plant "North", line 1\nsecond line ✓', "Region / Plant"]);
      expect(named.get(renamed)).toEqual(["New name", "New path"]);
      for (const unnamed of [deleted, foreign, ""]) expect(named.get(unnamed)).toEqual([null, null]);
      expect(map).toHaveLength(sites.length);
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
});

describe("inline Number and Date attribute conversions", () => {
  const numbers = ["1", "1.50", "-0.25", "+7", "5.", ".5", " 42 ", "1e3", "2.5E-2", "1e999", "12 kg", "", "abc", "1,5", "--1", "Infinity", "NaN", "\u0663", "\u00a05", "1e", "0x10", "1.2.3"];
  const dates = ["2024-02-29", "2023-02-29", "2024-04-31", "2024-12-31", "2024-13-01", "2024-00-10", "0000-01-01", "0001-01-01", "2024-1-01", "24-01-01", "2024-01-01T00:00", "", "\u0662024-01-01", "1900-02-29", "2000-02-29"];

  it("agree with export_try_numeric / export_try_date on every kind of input", async () => {
    const pool = testPool();
    try {
      const n = await pool.query(
        `SELECT v, ${numberAttribute("v")} AS inline, export_number_text(export_try_numeric(v)) AS reference FROM unnest($1::text[]) v`,
        [numbers],
      );
      for (const row of n.rows) expect({ v: row.v, out: row.inline }).toEqual({ v: row.v, out: row.reference });
      expect(n.rows.find((r) => r.v === "1.50").inline).toBe("1.5");
      const d = await pool.query(`SELECT v, ${dateAttribute("v")} AS inline, export_try_date(v)::text AS reference FROM unnest($1::text[]) v`, [dates]);
      for (const row of d.rows) expect({ v: row.v, out: row.inline }).toEqual({ v: row.v, out: row.reference });
      expect(d.rows.find((r) => r.v === "2024-02-29").inline).toBe("2024-02-29");
    } finally {
      await pool.end();
    }
  });
});
