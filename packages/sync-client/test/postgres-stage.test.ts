/**
 * The PostgreSQL target stages an upserted page in a temporary table its connection keeps (one per
 * width, emptied by every commit): two datasets of the same width written in turn on one connection,
 * a page failing and rolled back between, must each hold exactly their own rows, and no page may see
 * another's. Needs a PostgreSQL server: DATABASE_URL (default the local one).
 */
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { newDatasetState } from "../src/state";
import { PostgresTarget } from "../src/targets/postgres";
import type { TablePlan } from "../src/targets";
import { databaseUrl, onItsOwnConnection, SERVER } from "./postgres-admin";

const HEADER = ["id", "note", "_cursor"];
const plan = (table: string): TablePlan => ({ table, keyColumns: ["id"], columns: { id: "uuid", note: "text" } });
const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

describe("PostgreSQL target: the staging table a connection keeps", () => {
  const database = `sync_stage_${randomBytes(4).toString("hex")}`;
  beforeAll(() => onItsOwnConnection(SERVER, `CREATE DATABASE ${database}`));
  afterAll(() => onItsOwnConnection(SERVER, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));

  it("holds one page at a time, across datasets of one width and a page rolled back", async () => {
    // Two connections, one of them the writer lock's: every page goes through the same session's staging table.
    const target = new PostgresTarget(databaseUrl(database), 2);
    await target.open({ writer: true });
    const write = (table: string, records: string, failAfter = false) => {
      const state = newDatasetState(table, table);
      return target.writeRawPage({
        plan: plan(table), header: HEADER, records: Readable.from([Buffer.from(records)]), cursorColumn: 2, generation: 1, append: false,
        assertCleanEnd: () => {
          if (failAfter) throw new Error("the body did not end cleanly");
        },
        stateAfter: () => state, recordsSeen: () => undefined,
      });
    };
    try {
      for (const t of ["a", "b"]) await target.ensureTable(plan(t), {});
      expect(await write("a", `${id(1)},a1,c1\n${id(2)},a2,c2\n`)).toEqual({ rows: 2 });
      expect(await write("b", `${id(3)},b3,c3\n`)).toEqual({ rows: 1 });
      await expect(write("a", `${id(4)},never,c4\n`, true)).rejects.toThrow("did not end cleanly");
      expect(await write("b", `${id(3)},b3 again,c3\n${id(5)},b5,c5\n`)).toEqual({ rows: 2 });
      expect(await write("a", `${id(2)},a2 again,c2\n`)).toEqual({ rows: 1 });
    } finally {
      await target.close();
    }
    const url = databaseUrl(database);
    expect(await onItsOwnConnection(url, "SELECT id::text, note FROM a ORDER BY id")).toEqual([
      { id: id(1), note: "a1" },
      { id: id(2), note: "a2 again" },
    ]);
    expect(await onItsOwnConnection(url, "SELECT id::text, note FROM b ORDER BY id")).toEqual([
      { id: id(3), note: "b3 again" },
      { id: id(5), note: "b5" },
    ]);
  });
});
