/**
 * The DuckDB target's appended read (no services): pages go straight into the table by one INSERT
 * from read_csv, and a key met again during the read keeps only its latest rows when the read ends
 * (a grid submission's rows replaced as a set); pages are committed in parts (small ones here).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { newDatasetState, type DatasetState } from "../src/state";
import { DuckDBTarget } from "../src/targets/duckdb";
import type { TablePlan } from "../src/targets/target";

const GRID: TablePlan = { table: "form__items", keyColumns: ["id", "row_index"], columns: { id: "uuid", last_modified: "dateTime", row_index: "number", item: "text" } };
const RESOURCES: TablePlan = { table: "resources_products", keyColumns: ["id"], columns: { id: "uuid", last_modified: "dateTime", name: "text" } };
const A = "00000000-0000-4000-8000-00000000000a";
const B = "00000000-0000-4000-8000-00000000000b";

describe("DuckDB target: an appended read", () => {
  let dir: string;
  let target: DuckDBTarget;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "duckdb-append-"));
    target = new DuckDBTarget(join(dir, "copy.duckdb"));
    await target.open({ writer: true });
  });
  afterEach(async () => {
    await target.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Syncs `pages` (CSV records after the header) as one read from the beginning; returns the rows of
   * the table. `byRecord`: each record arrives as a chunk of its own (so parts can end between them).
   */
  async function read(plan: TablePlan, header: string[], pages: string[], byRecord = false) {
    let state: DatasetState = { ...newDatasetState(plan.table, plan.table), generation: 1, inProgress: true };
    state.columns = await target.ensureTable(plan, {});
    const appending = await target.startAppend(plan, state.key);
    state = { ...state, appending };
    const written: number[] = [];
    const parts: Array<{ rows: number; lastCursor: string }> = [];
    for (const page of pages) {
      const pageStart = state;
      const { rows } = await target.writeRawPage({
        plan,
        header: [...header, "_cursor"],
        records: Readable.from(byRecord ? page.split(/(?<=\n)/).map((r) => Buffer.from(r)) : [Buffer.from(page)]),
        assertCleanEnd: () => undefined,
        cursorColumn: header.length,
        generation: state.generation,
        append: state.appending,
        stateAfter: ({ rows: count, lastCursor }) => (state = { ...pageStart, cursor: lastCursor ?? pageStart.cursor, rowsUpserted: pageStart.rowsUpserted + count }),
        statePart: (part) => {
          parts.push(part);
          return { ...pageStart, cursor: part.lastCursor, rowsUpserted: pageStart.rowsUpserted + part.rows };
        },
      });
      written.push(rows);
    }
    const finished = await target.finishDataset({ plan, state: { ...state, inProgress: false, appending: false }, sweepBelowGeneration: 1 });
    const stored = await (target as unknown as { rows(sql: string): Promise<Array<Record<string, unknown>>> }).rows(
      `SELECT ${header.map((k) => `CAST("${k}" AS VARCHAR) AS "${k}"`).join(", ")} FROM "${plan.table}" ORDER BY ALL`,
    );
    return { appending, written, cursor: state.cursor, finished, stored, parts };
  }

  it("appends into an empty grid table; a submission met again on a later page replaces its rows as a set", async () => {
    const { appending, written, cursor, finished, stored } = await read(GRID, ["id", "last_modified", "row_index", "item"], [
      `${A},2024-01-01T00:00:00.000Z,1,floor,c1\n${A},2024-01-01T00:00:00.000Z,2,ceiling,c2\n${A},2024-01-01T00:00:00.000Z,3,"",c3\n`,
      `${B},2024-01-02T00:00:00.000Z,1,belt,c4\n${A},2024-01-03T00:00:00.000Z,1,floor,c5\n${A},2024-01-03T00:00:00.000Z,2,walls,c6\n`,
    ]);
    expect(appending).toBe(true);
    expect(written).toEqual([3, 3]);
    expect(cursor).toBe("c6");
    expect(stored).toEqual([
      { id: A, last_modified: "2024-01-03 00:00:00+00", row_index: "1.0", item: "floor" },
      { id: A, last_modified: "2024-01-03 00:00:00+00", row_index: "2.0", item: "walls" },
      { id: B, last_modified: "2024-01-02 00:00:00+00", row_index: "1.0", item: "belt" },
    ]);
    // The old version's three rows went, the row its new version lost (row 3) among them.
    expect(finished.trimmed).toBe(3);
  });

  it("keeps a resource met twice once, its latest row; an unquoted empty field is null, a quoted one empty", async () => {
    const { stored } = await read(RESOURCES, ["id", "last_modified", "name"], [
      `${A},2024-01-01T00:00:00.000Z,old,c1\n${B},2024-01-01T00:00:00.000Z,,c2\n`,
      `${A},2024-01-05T00:00:00.000Z,"",c3\n`,
    ]);
    expect(stored).toEqual([
      { id: A, last_modified: "2024-01-05 00:00:00+00", name: "" },
      { id: B, last_modified: "2024-01-01 00:00:00+00", name: null },
    ]);
  });

  it("commits an appended page in parts, each with the state at its last record; the rows are the same", async () => {
    await target.close();
    target = new DuckDBTarget(join(dir, "copy.duckdb"), { partBytes: 1 });
    await target.open({ writer: true });
    const { written, cursor, stored, parts } = await read(GRID, ["id", "last_modified", "row_index", "item"], [
      `${A},2024-01-01T00:00:00.000Z,1,floor,c1\n${A},2024-01-01T00:00:00.000Z,2,ceiling,c2\n${A},2024-01-01T00:00:00.000Z,3,"",c3\n`,
      `${B},2024-01-02T00:00:00.000Z,1,belt,c4\n${A},2024-01-03T00:00:00.000Z,1,floor,c5\n${A},2024-01-03T00:00:00.000Z,2,walls,c6\n`,
    ], true);
    expect(written).toEqual([3, 3]);
    // Every record its own part: the last of each page ends it with stateAfter, the others with statePart.
    expect(parts).toEqual([{ rows: 1, lastCursor: "c1" }, { rows: 2, lastCursor: "c2" }, { rows: 1, lastCursor: "c4" }, { rows: 2, lastCursor: "c5" }]);
    expect(cursor).toBe("c6");
    expect(stored).toEqual([
      { id: A, last_modified: "2024-01-03 00:00:00+00", row_index: "1.0", item: "floor" },
      { id: A, last_modified: "2024-01-03 00:00:00+00", row_index: "2.0", item: "walls" },
      { id: B, last_modified: "2024-01-02 00:00:00+00", row_index: "1.0", item: "belt" },
    ]);
  });

  it("keeps the parts committed before a part that fails, and the state after them: a resume continues there", async () => {
    await target.close();
    target = new DuckDBTarget(join(dir, "copy.duckdb"), { partBytes: 1 });
    await target.open({ writer: true });
    // The second record's id is no uuid: its part fails after the first part committed.
    await expect(read(RESOURCES, ["id", "last_modified", "name"], [`${A},2024-01-01T00:00:00.000Z,first,c1\nnot-a-uuid,2024-01-02T00:00:00.000Z,second,c2\n`], true)).rejects.toThrow();
    const saved = (await target.loadState()).datasets.get(RESOURCES.table);
    expect(saved?.cursor).toBe("c1");
    expect(saved?.rowsUpserted).toBe(1);
    const rows = await (target as unknown as { rows(sql: string): Promise<Array<Record<string, unknown>>> }).rows(`SELECT CAST(id AS VARCHAR) AS id, name FROM "${RESOURCES.table}"`);
    expect(rows).toEqual([{ id: A, name: "first" }]);
  });

  it("upserts a page in parts into a table that held rows; a grid submission across a part boundary is trimmed as across pages", async () => {
    await read(GRID, ["id", "last_modified", "row_index", "item"], [
      `${A},2024-01-01T00:00:00.000Z,1,floor,c1\n${A},2024-01-01T00:00:00.000Z,2,ceiling,c2\n${A},2024-01-01T00:00:00.000Z,3,roof,c3\n`,
    ]);
    await target.close();
    target = new DuckDBTarget(join(dir, "copy.duckdb"), { partBytes: 1 });
    await target.open({ writer: true });
    // A's new version has two rows, split over two parts; row 3 of the old version must go.
    const again = await read(GRID, ["id", "last_modified", "row_index", "item"], [
      `${A},2024-01-02T00:00:00.000Z,1,floor,c4\n${A},2024-01-02T00:00:00.000Z,2,walls,c5\n`,
    ], true);
    expect(again.appending).toBe(false);
    expect(again.parts).toEqual([{ rows: 1, lastCursor: "c4" }]);
    expect(again.stored).toEqual([
      { id: A, last_modified: "2024-01-02 00:00:00+00", row_index: "1.0", item: "floor" },
      { id: A, last_modified: "2024-01-02 00:00:00+00", row_index: "2.0", item: "walls" },
    ]);
  });

  it("upserts into a table that held rows when the read began", async () => {
    await read(RESOURCES, ["id", "last_modified", "name"], [`${A},2024-01-01T00:00:00.000Z,first,c1\n`]);
    const again = await read(RESOURCES, ["id", "last_modified", "name"], [`${A},2024-01-02T00:00:00.000Z,second,c2\n${A},2024-01-03T00:00:00.000Z,third,c3\n`]);
    expect(again.appending).toBe(false);
    expect(again.stored).toEqual([{ id: A, last_modified: "2024-01-03 00:00:00+00", name: "third" }]);
  });
});
