import { randomBytes, randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { Errors } from "@exportsvc/common";
import { CURRENT_CURSOR_VERSION, CursorCodec, CursorKeyring, type ColumnSpec } from "@exportsvc/datasets";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { exportError, exportPage, registerFixedDataset, startExport, TEST_CURSOR_KEYS, upsertRegistry, type ExportHarness } from "./support";

let pool: Pool;
let harness: ExportHarness;
let org: string;
const gridTable = `export_test_errgrid_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
const gridColumns: ColumnSpec[] = [
  { key: "id", dataType: "uuid", source: { kind: "table", column: "c1" } },
  { key: "last_modified", dataType: "dateTime", source: { kind: "table", column: "c2" } },
  { key: "row_index", dataType: "number", source: { kind: "table", column: "c3" } },
];
let supplierCursor: string;

beforeAll(async () => {
  pool = testPool();
  harness = await startExport();
  org = await createTestOrganization(pool);
  await registerFixedDataset(pool, org, "resources_suppliers");
  await registerFixedDataset(pool, org, "resources_customers");
  await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'A'), ($1, gen_random_uuid(), 'B')`, [org]);
  await pool.query(`CREATE TABLE ${gridTable} (organization_id uuid, id uuid, last_modified timestamptz, completed_at timestamptz, row_index int,
    c1 text, c2 text, c3 text)`);
  await pool.query(`INSERT INTO ${gridTable} VALUES ($1, gen_random_uuid(), now(), NULL, 1, 'x', 'y', '1')`, [org]);
  await upsertRegistry(pool, org, { key: "audit__rows", kind: "grid", sourceRef: randomUUID(), columns: gridColumns, tableName: gridTable });
  await upsertRegistry(pool, org, { key: "broken_form", kind: "submission", sourceRef: randomUUID(), columns: gridColumns, state: "failed" });
  await upsertRegistry(pool, org, { key: "old_name", kind: "submission", sourceRef: randomUUID(), columns: gridColumns, state: "retired" });
  const page = await exportPage(harness.client, { organizationId: org, datasetKey: "resources_suppliers", limit: 1 });
  supplierCursor = page.rows[0]._cursor;
});

afterAll(async () => {
  await harness.stop();
  await pool.query(`DROP TABLE IF EXISTS ${gridTable}`);
  await pool.end();
});

const req = (datasetKey: string, extra: Record<string, unknown> = {}) => ({ organizationId: org, datasetKey, ...extra });
const fail = (datasetKey: string, extra: Record<string, unknown> = {}) => exportError(harness.client, req(datasetKey, extra));

describe("dataset look-up", () => {
  it("answers 404 DATASET_NOT_FOUND for an unknown, retired or other organization's key", async () => {
    for (const err of [await fail("nope"), await fail("old_name"), await exportError(harness.client, { organizationId: randomUUID(), datasetKey: "resources_suppliers" })]) {
      expect(err).toMatchObject({ status: 404, errorCode: "DATASET_NOT_FOUND" });
    }
  });

  it("answers 503 DATASET_NOT_EXPORTABLE (no Retry-After) for a failed dataset", async () => {
    const err = await fail("broken_form");
    expect(err).toMatchObject({ status: 503, errorCode: "DATASET_NOT_EXPORTABLE" });
    expect(err.retryAfter).toBeUndefined();
  });

  it("the 503's detail is the service's own words: the recorded cause (database text) is never shown", async () => {
    await pool.query(`UPDATE dataset_registry SET error = 'rebuild failed: time zone "Mars/Olympus" not recognized' WHERE organization_id = $1 AND key = 'broken_form'`, [org]);
    const err = await fail("broken_form");
    expect(err).toMatchObject({ status: 503, errorCode: "DATASET_NOT_EXPORTABLE" });
    expect(err.detail).toContain("broken_form");
    expect(err.detail).not.toMatch(/Mars|not recognized|time zone/);
  });

  it("a key with a NUL (text PostgreSQL cannot take) is 404 DATASET_NOT_FOUND, decided before the database", async () => {
    const err = await fail("broken_form\u0000");
    expect(err).toMatchObject({ status: 404, errorCode: "DATASET_NOT_FOUND" });
    expect(err.detail).toContain("'broken_form%00'");
  });

  it("a dataset that cannot be served wins over a wrong parameter", async () => {
    expect(await fail("nope", { limit: 0 })).toMatchObject({ errorCode: "DATASET_NOT_FOUND" });
    expect(await fail("broken_form", { limit: 9999, cursor: "x" })).toMatchObject({ errorCode: "DATASET_NOT_EXPORTABLE" });
  });

  it("brings the registry up to date first when a sync is pending", async () => {
    await pool.query(`INSERT INTO registry_sync_queue (organization_id) VALUES ($1) ON CONFLICT DO NOTHING`, [org]);
    await exportPage(harness.client, req("resources_suppliers"));
    expect(harness.syncCalls).toContain(org);
    await pool.query(`DELETE FROM registry_sync_queue WHERE organization_id = $1`, [org]);
  });
});

describe("registry sync failing", () => {
  it("answers 503 DATABASE_UNAVAILABLE rather than exporting with a stale shape", async () => {
    const syncDown = await startExport({}, undefined, async () => {
      throw Errors.databaseUnavailable("An internal service did not answer. Retry with exponential backoff.");
    });
    try {
      await pool.query(`INSERT INTO registry_sync_queue (organization_id) VALUES ($1) ON CONFLICT DO NOTHING`, [org]);
      expect(await exportError(syncDown.client, req("resources_suppliers"))).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    } finally {
      await pool.query(`DELETE FROM registry_sync_queue WHERE organization_id = $1`, [org]);
      await syncDown.stop();
    }
  });
});

describe("parameter checks, in the contract's order (docs/contract.md §10)", () => {
  it.each([0, -1, 5001])("limit %i is a 400 INVALID_PARAMETER naming limit", async (limit) => {
    const err = await fail("resources_suppliers", { limit });
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
    expect(Object.keys(err.errors ?? {})).toEqual(["limit"]);
  });

  it("accepts limit 5000 and an absent limit (default 5000)", async () => {
    expect((await exportPage(harness.client, req("resources_suppliers", { limit: 5000 }))).rows).toHaveLength(2);
    expect((await exportPage(harness.client, req("resources_suppliers"))).rows).toHaveLength(2);
  });

  it.each([
    ["cursor with modifiedSince", { cursor: "abc", modifiedSinceMicros: 1n, after: randomUUID() }],
    ["cursor with after", { cursor: "abc", after: randomUUID() }],
    ["cursor with afterRowIndex", { cursor: "abc", afterRowIndex: 1n }],
    ["modifiedSince alone", { modifiedSinceMicros: 1n }],
    ["after alone", { after: randomUUID() }],
    ["afterRowIndex without after", { modifiedSinceMicros: 1n, afterRowIndex: 2n }],
  ])("%s is INVALID_CURSOR", async (_, extra) => {
    expect(await fail("audit__rows", extra)).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR" });
  });

  it("afterRowIndex on a dataset without row_index, or below 1, is INVALID_PARAMETER", async () => {
    const base = { modifiedSinceMicros: 1n, after: randomUUID() };
    const noRowIndex = await fail("resources_suppliers", { ...base, afterRowIndex: 1n });
    expect(noRowIndex).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
    expect(noRowIndex.errors).toHaveProperty("afterRowIndex");
    expect(await fail("audit__rows", { ...base, afterRowIndex: 0n })).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
  });

  it("a grid paged with modifiedSince and after but no afterRowIndex is MISSING_PARAMETER", async () => {
    const err = await fail("audit__rows", { modifiedSinceMicros: 1n, after: randomUUID() });
    expect(err).toMatchObject({ status: 400, errorCode: "MISSING_PARAMETER" });
  });

  it("from/to on a dataset without completed_at is INVALID_PARAMETER", async () => {
    const err = await fail("resources_suppliers", { fromMicros: 0n });
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
    expect(err.errors).toHaveProperty("from");
  });

  it("an `after` that is not a uuid is INVALID_PARAMETER naming after (never reaches SQL)", async () => {
    const err = await fail("resources_suppliers", { modifiedSinceMicros: 1n, after: "x' OR 1=1 --" });
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_PARAMETER" });
    expect(err.errors).toHaveProperty("after");
  });

  it("limit is checked before the cursor", async () => {
    expect(await fail("resources_suppliers", { limit: 0, cursor: "" })).toMatchObject({ errorCode: "INVALID_PARAMETER" });
  });
});

describe("INVALID_CURSOR cases are distinguishable", () => {
  const problem = async (datasetKey: string, cursor: string, client = harness) => {
    const err = await exportError(client.client, req(datasetKey, { cursor }));
    expect(err).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR" });
    return err.extensions?.cursorProblem;
  };

  it("accepts the cursor as issued", async () => {
    const next = await exportPage(harness.client, req("resources_suppliers", { cursor: supplierCursor }));
    expect(next.rows).toHaveLength(1);
  });

  it("empty", async () => expect(await problem("resources_suppliers", "")).toBe("empty"));
  it("not a cursor at all", async () => expect(await problem("resources_suppliers", "hello-world")).toBe("not_a_cursor"));
  it("'+' that arrived as a space", async () =>
    expect(await problem("resources_suppliers", supplierCursor.replace(/[A-Za-z0-9]/, " "))).toBe("not_a_cursor"));
  it("truncated", async () => expect(await problem("resources_suppliers", supplierCursor.slice(0, -3))).toBe("truncated"));
  it("altered", async () => {
    const i = 30;
    const altered = supplierCursor.slice(0, i) + (supplierCursor[i] === "Q" ? "R" : "Q") + supplierCursor.slice(i + 1);
    expect(await problem("resources_suppliers", altered)).toBe("altered");
  });
  it("issued for a different dataset", async () => expect(await problem("resources_customers", supplierCursor)).toBe("other_dataset"));

  it("issued for another organization's dataset of the same key and shape: exactly like an altered cursor", async () => {
    const otherOrg = await createTestOrganization(pool);
    await registerFixedDataset(pool, otherOrg, "resources_suppliers");
    await registerFixedDataset(pool, otherOrg, "resources_customers");
    await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'C'), ($1, gen_random_uuid(), 'D')`, [otherOrg]);
    const sameShape = await pool.query(
      `SELECT count(DISTINCT shape_fingerprint)::int AS shapes FROM dataset_registry WHERE key = 'resources_suppliers' AND organization_id = ANY($1)`,
      [[org, otherOrg]],
    );
    expect(sameShape.rows[0].shapes).toBe(1);

    const foreign = await exportError(harness.client, { organizationId: otherOrg, datasetKey: "resources_suppliers", cursor: supplierCursor });
    const i = 30;
    const altered = supplierCursor.slice(0, i) + (supplierCursor[i] === "Q" ? "R" : "Q") + supplierCursor.slice(i + 1);
    const alteredOwn = await exportError(harness.client, { organizationId: otherOrg, datasetKey: "resources_suppliers", cursor: altered });
    expect(foreign).toMatchObject({ status: 400, errorCode: "INVALID_CURSOR", extensions: { cursorProblem: "altered" } });
    expect(foreign).toEqual(alteredOwn);
    // Not "other_dataset" either: the foreign cursor must not verify for any of this organization's datasets.
    expect(await exportError(harness.client, { organizationId: otherOrg, datasetKey: "resources_customers", cursor: supplierCursor })).toEqual(alteredOwn);
  });

  it("columns added since issue: the cursor is bound to the row shape, not the columns, and pages on", async () => {
    const reshapeOrg = await createTestOrganization(pool);
    await registerFixedDataset(pool, reshapeOrg, "resources_suppliers");
    await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'A'), ($1, gen_random_uuid(), 'B')`, [reshapeOrg]);
    const first = await exportPage(harness.client, { organizationId: reshapeOrg, datasetKey: "resources_suppliers", limit: 1 });
    await registerFixedDataset(pool, reshapeOrg, "resources_suppliers", [
      { id: randomUUID(), kind: "suppliers", key: "grade", name: "Grade", type: "Text" },
    ]);
    const next = await exportPage(harness.client, { organizationId: reshapeOrg, datasetKey: "resources_suppliers", cursor: first.rows[0]._cursor });
    expect(next.header).toContain("grade");
    expect(next.rows.map((r) => r.name)).toEqual([first.rows[0].name === "A" ? "B" : "A"]);
  });

  it("a cursor issued before row shapes (bound to the column fingerprint) still verifies, also after a column change", async () => {
    const legacyOrg = await createTestOrganization(pool);
    await registerFixedDataset(pool, legacyOrg, "resources_suppliers");
    await registerFixedDataset(pool, legacyOrg, "resources_customers");
    await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'A'), ($1, gen_random_uuid(), 'B')`, [legacyOrg]);
    const first = (await exportPage(harness.client, { organizationId: legacyOrg, datasetKey: "resources_suppliers", limit: 1 })).rows[0];
    const fingerprint = (
      await pool.query(`SELECT shape_fingerprint FROM dataset_registry WHERE organization_id = $1 AND key = 'resources_suppliers'`, [legacyOrg])
    ).rows[0].shape_fingerprint as string;
    const codec = new CursorCodec({ keyring: CursorKeyring.parse(TEST_CURSOR_KEYS) });
    const position = codec.parse(first._cursor);
    if (!position.ok) throw new Error("the issued cursor does not parse");
    const legacy = codec.encode(position.cursor.position, { organizationId: legacyOrg, datasetKey: "resources_suppliers", rowShape: fingerprint });
    expect(legacy).not.toBe(first._cursor);
    const resume = () => exportPage(harness.client, { organizationId: legacyOrg, datasetKey: "resources_suppliers", cursor: legacy });
    expect((await resume()).rows).toHaveLength(1);
    await registerFixedDataset(pool, legacyOrg, "resources_suppliers", [{ id: randomUUID(), kind: "suppliers", key: "grade", name: "Grade", type: "Text" }]);
    expect((await resume()).rows).toHaveLength(1);
    // Still bound to its dataset: on another dataset it is other_dataset, as a current cursor would be.
    const err = await exportError(harness.client, { organizationId: legacyOrg, datasetKey: "resources_customers", cursor: legacy });
    expect(err.extensions?.cursorProblem).toBe("other_dataset");
  });

  it("issued by a cursor version no longer read", async () => {
    const nextVersion = await startExport({}, CURRENT_CURSOR_VERSION + 1);
    try {
      expect(await problem("resources_suppliers", supplierCursor, nextVersion)).toBe("retired_version");
      const fresh = (await exportPage(nextVersion.client, req("resources_suppliers", { limit: 1 }))).rows[0]._cursor;
      expect((await exportPage(nextVersion.client, req("resources_suppliers", { cursor: fresh }))).rows).toHaveLength(1);
    } finally {
      await nextVersion.stop();
    }
  });

  it("keeps verifying after the signing key rotates, refuses once the key is removed", async () => {
    const [oldKey, otherKey] = TEST_CURSOR_KEYS.split(",");
    const newKey = `11:${randomBytes(24).toString("base64")}`;
    const rotated = await startExport({ CURSOR_KEYS: `${newKey},${oldKey}` });
    const removed = await startExport({ CURSOR_KEYS: `${newKey},${otherKey}` });
    try {
      expect((await exportPage(rotated.client, req("resources_suppliers", { cursor: supplierCursor }))).rows).toHaveLength(1);
      expect(await problem("resources_suppliers", supplierCursor, removed)).toBe("unknown_signing_key");
    } finally {
      await rotated.stop();
      await removed.stop();
    }
  });
});

describe("cancellation", () => {
  it("cancels the running query and releases the connection when the client goes away", async () => {
    const bigOrg = await createTestOrganization(pool);
    await registerFixedDataset(pool, bigOrg, "resources_suppliers");
    await pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description)
       SELECT $1, gen_random_uuid(), 'S' || g, repeat(md5(g::text), 256) FROM generate_series(1, 5000) g`,
      [bigOrg],
    );
    const single = await startExport({ DATABASE_POOL_MAX: "1", EXPORT_CHUNK_BYTES: "16384" });
    try {
      const stream = single.client.exportCsv({ organizationId: bigOrg, datasetKey: "resources_suppliers" });
      await new Promise<void>((resolve) => stream.once("data", () => resolve()));
      stream.pause(); // backpressure: the server stops reading from PostgreSQL mid-COPY
      stream.on("error", () => undefined);
      const running = async () =>
        Number(
          (
            await pool.query(`SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'COPY%' AND query LIKE $1 AND pid <> pg_backend_pid()`, [
              `%${bigOrg}%`,
            ])
          ).rows[0].count,
        );
      expect(await running()).toBe(1);
      stream.cancel();
      while ((await running()) > 0) await new Promise((r) => setTimeout(r, 50));
      // With a pool of one connection, the next export only runs if the cancelled one gave it back.
      const next = await exportPage(single.client, { organizationId: bigOrg, datasetKey: "resources_suppliers", limit: 3 });
      expect(next.rows).toHaveLength(3);
    } finally {
      await single.stop();
    }
  });
});

describe("failures before and after the first chunk", () => {
  const view = `export_test_failing_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
  const viewColumns: ColumnSpec[] = [
    { key: "id", dataType: "uuid", source: { kind: "table", column: "c1" } },
    { key: "filler", dataType: "text", source: { kind: "table", column: "c2" } },
    { key: "ratio", dataType: "number", source: { kind: "table", column: "c3" } },
  ];
  let failOrg: string;

  beforeAll(async () => {
    failOrg = await createTestOrganization(pool);
    // A "materialized" dataset whose row `fail_at` cannot be rendered (division by zero).
    await pool.query(`CREATE TABLE ${view}_src (organization_id uuid, id uuid, n int, last_modified timestamptz)`);
    await pool.query(
      `INSERT INTO ${view}_src SELECT $1, gen_random_uuid(), g, timestamptz '2024-01-01' + g * interval '1 second' FROM generate_series(1, 3000) g`,
      [failOrg],
    );
    await pool.query(`CREATE TABLE ${view}_fail (fail_at int)`);
    await pool.query(`INSERT INTO ${view}_fail VALUES (0)`);
    await pool.query(`CREATE VIEW ${view} AS
      SELECT s.organization_id, s.id, s.last_modified, NULL::timestamptz AS completed_at, s.id::text AS c1, repeat('x', 2000) AS c2,
             (1 / (s.n - f.fail_at))::text AS c3
        FROM ${view}_src s CROSS JOIN ${view}_fail f`);
    await upsertRegistry(pool, failOrg, { key: "failing", kind: "submission", sourceRef: randomUUID(), columns: viewColumns, tableName: view });
    await upsertRegistry(pool, failOrg, { key: "missing_table", kind: "submission", sourceRef: randomUUID(), columns: viewColumns, tableName: `${view}_nope` });
  });

  afterAll(async () => {
    await pool.query(`DROP VIEW IF EXISTS ${view}; DROP TABLE IF EXISTS ${view}_src, ${view}_fail`);
  });

  const setFailAt = (n: number) => pool.query(`UPDATE ${view}_fail SET fail_at = $1`, [n]);

  it("a row that cannot be rendered inside the first 64 KiB is a 503 DATASET_NOT_EXPORTABLE, nothing sent", async () => {
    await setFailAt(10);
    const err = await exportError(harness.client, { organizationId: failOrg, datasetKey: "failing" });
    expect(err).toMatchObject({ status: 503, errorCode: "DATASET_NOT_EXPORTABLE" });
  });

  it("a missing materialized table is a 503 DATASET_NOT_EXPORTABLE", async () => {
    expect(await exportError(harness.client, { organizationId: failOrg, datasetKey: "missing_table" })).toMatchObject({
      errorCode: "DATASET_NOT_EXPORTABLE",
    });
  });

  it("a failure after the first chunk fails the stream after data was sent (never a clean, short end)", async () => {
    await setFailAt(0);
    const received = await new Promise<{ bytes: number; error?: unknown }>((resolve, reject) => {
      let bytes = 0;
      const stream = harness.client.exportCsv({ organizationId: failOrg, datasetKey: "failing" });
      stream.once("data", () => {
        // Hold the stream (backpressure) while the backend is killed mid-COPY, then read on.
        stream.pause();
        pool
          .query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'COPY%' AND query LIKE $1 AND pid <> pg_backend_pid()`, [
            `%org=${failOrg}%`,
          ])
          .then((r) => {
            expect(r.rowCount).toBe(1);
            stream.resume();
          }, reject);
      });
      stream.on("data", (m: { data: Uint8Array }) => (bytes += m.data.length));
      stream.on("error", (error) => resolve({ bytes, error }));
      stream.on("end", () => resolve({ bytes }));
    });
    expect(received.error).toBeDefined();
    expect(received.bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect((await exportPage(harness.client, { organizationId: failOrg, datasetKey: "failing", limit: 5000 })).rows).toHaveLength(3000);
  });
});

describe("database unavailable", () => {
  it("answers 503 DATABASE_UNAVAILABLE when PostgreSQL cannot be reached", async () => {
    const down = await startExport({ DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" });
    try {
      const err = await exportError(down.client, { organizationId: org, datasetKey: "resources_suppliers" });
      expect(err).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    } finally {
      await down.stop();
    }
  });
});
