import { grpcServiceConfigSchema, DATABASE_POOL_MAX_USES_DEFAULT } from "@exportsvc/common";
import { createPool } from "../src/pool";
import { testDatabaseUrl } from "../../../test/support/db";

/**
 * A backend caches every relation it touched for as long as it lives; with a schema of tables per
 * organization a pooled connection that serves every organization in turn grows with the fleet
 * (docs/scale-out.md, "One node's ceiling"). DATABASE_POOL_MAX_USES retires a connection after that
 * many checkouts, so its caches start empty again.
 */
const backendPid = async (pool: ReturnType<typeof createPool>) => (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;

describe("pool connections retired after maxUses checkouts", () => {
  it("replaces the connection after maxUses uses, and keeps it without a bound", async () => {
    const bounded = createPool({ connectionString: testDatabaseUrl(), max: 1, maxUses: 3 });
    const unbounded = createPool({ connectionString: testDatabaseUrl(), max: 1, maxUses: 0 });
    try {
      const pids: number[] = [];
      for (let i = 0; i < 7; i++) pids.push(await backendPid(bounded));
      expect(new Set(pids.slice(0, 3)).size).toBe(1);
      expect(new Set(pids.slice(3, 6)).size).toBe(1);
      expect(pids[3]).not.toBe(pids[0]);
      expect(pids[6]).not.toBe(pids[3]);
      const kept: number[] = [];
      for (let i = 0; i < 7; i++) kept.push(await backendPid(unbounded));
      expect(new Set(kept).size).toBe(1);
    } finally {
      await bounded.end();
      await unbounded.end();
    }
  });

  it("reads DATABASE_POOL_MAX_USES in every gRPC service (default, 0 = never, a negative refused)", () => {
    const schema = grpcServiceConfigSchema({ GRPC_PORT: 1, DATABASE_POOL_MAX: 5 });
    const base = { DATABASE_URL: "postgres://x@localhost/db" };
    expect(schema.parse(base).DATABASE_POOL_MAX_USES).toBe(DATABASE_POOL_MAX_USES_DEFAULT);
    expect(schema.parse({ ...base, DATABASE_POOL_MAX_USES: "0" }).DATABASE_POOL_MAX_USES).toBe(0);
    expect(schema.safeParse({ ...base, DATABASE_POOL_MAX_USES: "-1" }).success).toBe(false);
  });
});
