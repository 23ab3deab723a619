import { randomUUID } from "node:crypto";
import { CURRENT_CURSOR_VERSION, CursorCodec, CursorKeyring, datasetMacKey } from "../src/cursor";
import { buildPageQuery, siteNameLookup, SITE_MAP_ROWS_PER_SITE, type PageDataset } from "../src/sql/page-query";
import { rowShape } from "../src/registry";
import { InvalidLiteralError, tableIdentifier, timestamptzLiteral, uuidLiteral } from "../src/sql/literals";
import { attributeExpression } from "../src/sql/attributes";

const codec = new CursorCodec({ keyring: CursorKeyring.parse("1:0123456789abcdef") });
const org = randomUUID();
const suppliers: PageDataset = {
  key: "resources_suppliers",
  kind: "resource",
  sourceRef: "suppliers",
  columns: [
    { key: "id", dataType: "uuid", source: { kind: "core", name: "id" } },
    { key: "last_modified", dataType: "dateTime", source: { kind: "core", name: "last_modified" } },
  ],
};
const grid: PageDataset = {
  key: "inspection__rows",
  kind: "grid",
  sourceRef: "form",
  tableName: "form_ds.t_123",
  columns: [
    { key: "id", dataType: "uuid", source: { kind: "table", column: "id" } },
    { key: "row_index", dataType: "number", source: { kind: "table", column: "row_index" } },
    { key: "ok", dataType: "boolean", source: { kind: "table", column: "ok" } },
  ],
};

const submissions: PageDataset = {
  key: "inspection",
  kind: "submission",
  sourceRef: "form",
  tableName: "form_ds.t_456",
  columns: [
    { key: "id", dataType: "uuid", source: { kind: "table", column: "id" } },
    { key: "site_id", dataType: "uuid", source: { kind: "table", column: "c3" } },
    { key: "site_name", dataType: "text", source: { kind: "table", column: "c4" } },
    { key: "site_path", dataType: "text", source: { kind: "table", column: "c5" } },
  ],
};

describe("literals", () => {
  it("writes exact microsecond timestamps", () => {
    expect(timestamptzLiteral(1_710_058_530_123_456n)).toBe("'2024-03-10 08:15:30.123456+00'::timestamptz");
    expect(timestamptzLiteral(-1n)).toBe("'1969-12-31 23:59:59.999999+00'::timestamptz");
  });

  it("accepts only valid uuids and table names", () => {
    expect(() => uuidLiteral("1' OR '1'='1")).toThrow(InvalidLiteralError);
    expect(uuidLiteral("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")).toBe("'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid");
    expect(tableIdentifier('form_ds.x"y')).toBe('"form_ds"."x""y"');
    expect(() => tableIdentifier("a.b.c")).toThrow(InvalidLiteralError);
  });

  it("refuses an attribute id that is not a uuid", () => {
    expect(() => attributeExpression("x' || 1 || '", "Text")).toThrow(InvalidLiteralError);
  });
});

describe("buildPageQuery", () => {
  it("selects keys only in the inner query with WITH TIES, renders columns outside", () => {
    const sql = buildPageQuery(suppliers, { organizationId: org, limit: 25 }, codec);
    expect(sql).toMatch(/SELECT t\.\* FROM suppliers t\s+WHERE t\.organization_id = '[0-9a-f-]+'::uuid\s+ORDER BY t\.last_modified, t\.id\s+FETCH FIRST 25 ROWS WITH TIES/);
    expect(sql).toMatch(/ORDER BY r\.last_modified, r\.id$/);
    expect(sql).toContain('AS "_cursor"');
  });

  it("pages strictly after a position; grids add row_index to the keyset and the order", () => {
    const after = { lastModifiedMicros: 1_000_000n, id: randomUUID(), rowIndex: 4 };
    expect(buildPageQuery(suppliers, { organizationId: org, limit: 1, after }, codec)).toContain(
      `(t.last_modified, t.id) > ('1970-01-01 00:00:01.000000+00'::timestamptz, '${after.id}'::uuid)`,
    );
    const sql = buildPageQuery(grid, { organizationId: org, limit: 1, after }, codec);
    expect(sql).toContain("(t.last_modified, t.id, t.row_index) > (");
    expect(sql).toContain(", 4)");
    expect(sql).toMatch(/ORDER BY r\.last_modified, r\.id, r\.row_index$/);
    expect(sql).toContain('FROM "form_ds"."t_123" t');
    expect(sql).toContain(`r."ok" AS "ok"`);
    expect(sql).toContain("int4send((r.row_index)::int4)");
  });

  it("filters form datasets on their submission's completed_at, from inclusive, to exclusive", () => {
    const sql = buildPageQuery(grid, { organizationId: org, limit: 10, completedFromMicros: 0n, completedToMicros: 1n }, codec);
    expect(sql).toContain("t.completed_at >= '1970-01-01 00:00:00.000000+00'::timestamptz");
    expect(sql).toContain("t.completed_at < '1970-01-01 00:00:00.000001+00'::timestamptz");
  });

  it("signs cursors with the MAC key of the requesting organization's dataset and shape", () => {
    const macKeyHex = (organizationId: string) =>
      datasetMacKey(codec.keyring.signing.secret, CURRENT_CURSOR_VERSION, { organizationId, datasetKey: suppliers.key, rowShape: rowShape(suppliers) }).toString("hex");
    const other = randomUUID();
    const sql = buildPageQuery(suppliers, { organizationId: org, limit: 25 }, codec);
    expect(sql).toContain(`'\\x${macKeyHex(org)}'::bytea`);
    expect(sql).not.toContain(macKeyHex(other));
    expect(buildPageQuery(suppliers, { organizationId: other, limit: 25 }, codec)).toContain(`'\\x${macKeyHex(other)}'::bytea`);
  });

  it("rejects a column without a known source", () => {
    const broken = { ...suppliers, columns: [{ key: "x", dataType: "text" as const, source: { kind: "core" as const, name: "nope" } }] };
    expect(() => buildPageQuery(broken, { organizationId: org, limit: 1 }, codec)).toThrow(/no source/);
  });
});

describe("site names of a submission page", () => {
  it("the map only once the page may hold SITE_MAP_ROWS_PER_SITE rows per site; the join while the count is unknown", () => {
    expect(siteNameLookup(undefined, 5000)).toBe("join");
    expect(siteNameLookup(0, 1)).toBe("map");
    expect(siteNameLookup(5000 / SITE_MAP_ROWS_PER_SITE, 5000)).toBe("map");
    expect(siteNameLookup(5000 / SITE_MAP_ROWS_PER_SITE + 1, 5000)).toBe("join");
    expect(siteNameLookup(1, SITE_MAP_ROWS_PER_SITE - 1)).toBe("join");
  });

  it("join: one memoizable probe of the organization's sites per row; map: one jsonb map per column, no join", () => {
    const join = buildPageQuery(submissions, { organizationId: org, limit: 10 }, codec);
    expect(join).toContain(`LEFT JOIN sites live_site ON live_site.organization_id = '${org}'::uuid AND live_site.id = NULLIF(r."c3", '')::uuid`);
    expect(join).toContain('live_site.name AS "site_name"');
    expect(buildPageQuery(submissions, { organizationId: org, limit: 10, siteNames: "join" }, codec)).toBe(join);

    const map = buildPageQuery(submissions, { organizationId: org, limit: 10, siteNames: "map" }, codec);
    expect(map).not.toContain("JOIN");
    expect(map).toContain(`(SELECT jsonb_object_agg(s.id::text, s.name) FROM sites s WHERE s.organization_id = '${org}'::uuid) ->> r."c3" AS "site_name"`);
    expect(map).toContain(`(SELECT jsonb_object_agg(s.id::text, s.path) FROM sites s WHERE s.organization_id = '${org}'::uuid) ->> r."c3" AS "site_path"`);
    // Datasets without the envelope's site are not affected.
    expect(buildPageQuery(grid, { organizationId: org, limit: 10, siteNames: "map" }, codec)).toBe(buildPageQuery(grid, { organizationId: org, limit: 10 }, codec));
  });
});
