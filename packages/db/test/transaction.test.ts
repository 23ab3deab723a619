import { randomUUID } from "node:crypto";
import { Client, type Pool } from "pg";
import { beginStatement, inTransaction } from "../src/transaction";
import { createPool } from "../src/pool";
import { testDatabaseUrl } from "../../../test/support/db";

describe("beginStatement", () => {
  it("spells the options as BEGIN's transaction modes", () => {
    expect(beginStatement()).toBe("BEGIN");
    expect(beginStatement({ isolation: "repeatable read" })).toBe("BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(beginStatement({ isolation: "serializable", readOnly: true })).toBe("BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY");
    expect(beginStatement({ readOnly: true })).toBe("BEGIN READ ONLY");
  });
});

describe("inTransaction", () => {
  let pool: Pool;
  // A table of this suite's own (temporary tables would not be seen by the second connection).
  const table = `tx_helper_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
  const rows = async () => (await pool.query<{ v: string }>(`SELECT v FROM ${table} ORDER BY v`)).rows.map((r) => r.v);

  beforeAll(async () => {
    pool = createPool({ connectionString: testDatabaseUrl(), max: 2 });
    await pool.query(`CREATE TABLE ${table} (v text PRIMARY KEY)`);
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });
  beforeEach(() => pool.query(`DELETE FROM ${table}`));

  it("commits what the body wrote and returns its value", async () => {
    const value = await inTransaction(pool, async (client) => {
      await client.query(`INSERT INTO ${table} VALUES ('a'), ('b')`);
      return 42;
    });
    expect(value).toBe(42);
    expect(await rows()).toEqual(["a", "b"]);
    expect(pool.idleCount + pool.waitingCount).toBe(pool.totalCount);
  });

  it("rolls everything back and rethrows the body's error, releasing the connection", async () => {
    const failure = new Error("half-way");
    await expect(
      inTransaction(pool, async (client) => {
        await client.query(`INSERT INTO ${table} VALUES ('a')`);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await rows()).toEqual([]);
    // Both connections are usable again: a leaked one would leave the second transaction waiting.
    await Promise.all([1, 2].map((i) => inTransaction(pool, (c) => c.query(`INSERT INTO ${table} VALUES ('${i}')`))));
    expect(await rows()).toEqual(["1", "2"]);
  });

  it("runs on a connection the caller holds and leaves it open for work after the commit", async () => {
    const client = await pool.connect();
    try {
      await inTransaction(client, (c) => c.query(`INSERT INTO ${table} VALUES ('held')`));
      // Committed: another connection sees the row; the held connection still answers.
      expect(await rows()).toEqual(["held"]);
      expect((await client.query<{ one: number }>("SELECT 1 AS one")).rows[0].one).toBe(1);
    } finally {
      client.release();
    }
  });

  it("applies the isolation level and read-only mode", async () => {
    const seen = await inTransaction(
      pool,
      async (client) => {
        const r = await client.query<{ iso: string; ro: string }>(
          "SELECT current_setting('transaction_isolation') AS iso, current_setting('transaction_read_only') AS ro",
        );
        return r.rows[0];
      },
      { isolation: "repeatable read", readOnly: true },
    );
    expect(seen).toEqual({ iso: "repeatable read", ro: "on" });
    await expect(inTransaction(pool, (c) => c.query(`INSERT INTO ${table} VALUES ('x')`), { readOnly: true })).rejects.toMatchObject({ code: "25006" });
    expect(await rows()).toEqual([]);
  });

  it("reads through another transaction's exported snapshot", async () => {
    await pool.query(`INSERT INTO ${table} VALUES ('before')`);
    const exporter = await pool.connect();
    const helper = new Client({ connectionString: testDatabaseUrl() });
    await helper.connect();
    try {
      await inTransaction(
        exporter,
        async () => {
          const snapshot = (await exporter.query<{ s: string }>("SELECT pg_export_snapshot() AS s")).rows[0].s;
          // Committed after the snapshot: invisible through it, visible to a fresh transaction.
          await pool.query(`INSERT INTO ${table} VALUES ('after')`);
          const throughSnapshot = await inTransaction(
            helper,
            async (c) => (await c.query<{ v: string }>(`SELECT v FROM ${table} ORDER BY v`)).rows.map((r) => r.v),
            { isolation: "repeatable read", snapshot },
          );
          expect(throughSnapshot).toEqual(["before"]);
        },
        { isolation: "repeatable read" },
      );
      expect(await rows()).toEqual(["after", "before"]);
    } finally {
      exporter.release();
      await helper.end();
    }
  });
});
