/**
 * The SQLite target keeps its insert statements prepared across pages (a few, the least recently
 * used dropped): more datasets than it keeps, written in turn, appended then upserted, one of them
 * given a new column between, must each hold exactly their own rows.
 */
import "../../../test/support/linked/better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Cell } from "../src/csv";
import { newDatasetState } from "../src/state";
import { SqliteTarget } from "../src/targets/sqlite";
import type { TablePlan } from "../src/targets";

const TABLES = 12;
const id = (t: number, r: number) => `00000000-0000-4000-8000-${String(t * 100 + r).padStart(12, "0")}`;

describe("SQLite target: statements kept prepared across pages", () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), "sync-statements-"))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("writes each dataset's pages into its own table, through evictions and a new column", async () => {
    const file = join(dir, "copy.db");
    const target = new SqliteTarget(file);
    await target.open({ writer: true });
    const plans: TablePlan[] = Array.from({ length: TABLES }, (_, t) => ({ table: `ds_${t}`, keyColumns: ["id"], columns: { id: "uuid", note: "text", n: "number" } }));
    const write = async (plan: TablePlan, header: string[], rows: Cell[][], append: boolean) => {
      async function* each() {
        for (const row of rows) yield row;
      }
      await target.writePage({ plan, header, rows: each(), generation: 1, append, stateAfter: () => newDatasetState(plan.table, plan.table) });
    };
    for (const plan of plans) {
      await target.ensureTable(plan, {});
      expect(await target.startAppend(plan, plan.table)).toBe(true);
    }
    // Appended, two pages a table (the second reuses the first's statement): each table rows 0-2.
    for (const [t, plan] of plans.entries()) {
      await write(plan, ["id", "note", "n", "_cursor"], [0, 1].map((r) => [id(t, r), `first ${t}.${r}`, String(r), "c"]), true);
      await write(plan, ["id", "note", "n", "_cursor"], [[id(t, 2), `first ${t}.2`, "2", "c"]], true);
    }
    for (const plan of plans) await target.finishDataset({ plan, state: newDatasetState(plan.table, plan.table), sweepBelowGeneration: null });
    // Table 0 gains a column; then every table's rows 1 and 2 upserted, row 3 added, a page each.
    await write(plans[0], ["id", "note", "n", "_cursor"], [[id(0, 0), "first 0.0", "0", "c"]], false);
    plans[0] = { ...plans[0], columns: { ...plans[0].columns, extra: "text" } };
    await target.ensureTable(plans[0], { id: "uuid", note: "text", n: "number" });
    // Upserted right after its appends (not their statement: those insert only), table 0 first.
    for (const [t, plan] of plans.entries()) {
      const header = t === 0 ? ["id", "note", "n", "extra", "_cursor"] : ["id", "note", "n", "_cursor"];
      for (const r of [1, 2, 3]) await write(plan, header, [[id(t, r), `second ${t}.${r}`, String(10 + r), ...(t === 0 ? [`x${r}`] : []), "c"]], false);
    }
    await target.close();

    const db = new Database(file, { readonly: true });
    try {
      for (let t = 0; t < TABLES; t++) {
        const rows = db.prepare(`SELECT id, note, n${t === 0 ? ", extra" : ""} FROM ds_${t} ORDER BY id`).all();
        expect(rows).toEqual([
          { id: id(t, 0), note: `first ${t}.0`, n: 0, ...(t === 0 ? { extra: null } : {}) },
          ...[1, 2, 3].map((r) => ({ id: id(t, r), note: `second ${t}.${r}`, n: 10 + r, ...(t === 0 ? { extra: `x${r}` } : {}) })),
        ]);
      }
    } finally {
      db.close();
    }
  });
});
