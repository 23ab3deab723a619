import { Client } from "pg";
import { randomBytes } from "node:crypto";
import { createDatabase, databaseExists, databaseUrl, dropDatabase } from "../src";
import { testDatabaseUrl } from "../../../test/support/db";

describe("the tests', benches' and tools' own databases", () => {
  const server = () => testDatabaseUrl();

  it("creates a database, returns its URL, and drops it", async () => {
    const name = `dbs_check_${randomBytes(4).toString("hex")}`;
    const url = await createDatabase(server(), name);
    try {
      expect(url).toBe(databaseUrl(server(), name));
      const c = new Client({ connectionString: url });
      await c.connect();
      expect((await c.query<{ db: string }>("SELECT current_database() AS db")).rows[0].db).toBe(name);
      await c.end();
      expect(await databaseExists(server(), name)).toBe(true);
      await expect(createDatabase(server(), name)).rejects.toThrow(/already exists/);
      await createDatabase(server(), name, { replace: true });
    } finally {
      await dropDatabase(server(), name);
    }
    expect(await databaseExists(server(), name)).toBe(false);
  });

  it("refuses a name that is not a plain identifier", async () => {
    await expect(createDatabase(server(), "x; DROP DATABASE postgres")).rejects.toThrow(/not a plain database name/);
    await expect(dropDatabase(server(), "Upper")).rejects.toThrow(/not a plain database name/);
  });
});
