import { once } from "node:events";
import { createPool } from "../src/pool";
import { testDatabaseUrl } from "../../../test/support/db";

/**
 * Found by the churn simulator (seed 2, fault restart-postgres): a client checked out of the pool,
 * idle between two queries when PostgreSQL shut its connection down (FATAL 57P01), emitted an
 * 'error' event nobody listened to, and the schema service process died.
 */
describe("a pool client whose connection is terminated while checked out", () => {
  it("does not raise an unhandled 'error' event; its next query fails and the pool hands out a fresh client", async () => {
    const pool = createPool({ connectionString: testDatabaseUrl(), max: 2 });
    const admin = createPool({ connectionString: testDatabaseUrl(), max: 1 });
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", onUncaught);
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      // Same message as a PostgreSQL shutdown: FATAL 57P01, sent while no query is active.
      // pg's client keeps its socket on `connection.stream`; its close is the event the client reacts to.
      const closed = once((client as unknown as { connection: { stream: NodeJS.EventEmitter } }).connection.stream, "close");
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      await closed;
      // The client handles the close in the same turn; one more turn for anything it defers.
      await new Promise((r) => setImmediate(r));
      await expect(client.query("SELECT 1")).rejects.toThrow();
      client.release(true);
      expect(uncaught).toEqual([]);
      const fresh = await pool.query<{ one: number }>("SELECT 1 AS one");
      expect(fresh.rows[0].one).toBe(1);
    } finally {
      process.off("uncaughtException", onUncaught);
      await pool.end();
      await admin.end();
    }
  });
});
