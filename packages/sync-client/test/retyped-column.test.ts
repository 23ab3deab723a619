/**
 * A table whose column the state does not know: a pass created the table (ensureTable) and failed
 * before any page saved the dataset's state (the field was retyped between the listing and the
 * page, and the page's text met the typed column). The next pass starts from a new state; the
 * listing now says text, and the stored column must be widened by what the table holds, or every
 * later page fails the same way and the dataset is never loaded again (a 60-second soak lost 27
 * rows so). Needs a PostgreSQL server for its case: DATABASE_URL (default the local one).
 */
import "../../../test/support/linked/better-sqlite3";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { newDatasetState, type DatasetState } from "../src/state";
import { openTarget, type TablePlan, type Target } from "../src/targets";
import { databaseUrl, onItsOwnConnection, SERVER } from "./postgres-admin";

const A = "00000000-0000-4000-8000-00000000000a";
const BEFORE: TablePlan = { table: "form_checks", keyColumns: ["id"], columns: { id: "uuid", last_modified: "dateTime", amount: "number" } };
const AFTER: TablePlan = { ...BEFORE, columns: { ...BEFORE.columns, amount: "text" } };
const HEADER = ["id", "last_modified", "amount", "_cursor"];
const PAGE = `${A},2024-01-01T00:00:00.000Z,raven 62,c1\n`;

/** One page written the way the engine writes it for this target (raw CSV records where it takes them). */
async function writeOnePage(target: Target, plan: TablePlan, state: DatasetState): Promise<number> {
  const stateAfter = () => ({ ...state, cursor: "c1" });
  if (target.writeRawPage) {
    const { rows } = await target.writeRawPage({
      plan, header: HEADER, records: Readable.from([Buffer.from(PAGE)]), assertCleanEnd: () => undefined, cursorColumn: 3,
      generation: state.generation, append: false, stateAfter, recordsSeen: () => undefined,
    });
    return rows;
  }
  async function* rows() {
    yield [A, "2024-01-01T00:00:00.000Z", "raven 62", "c1"];
  }
  return (await target.writePage({ plan, header: HEADER, rows: rows(), generation: state.generation, append: false, stateAfter })).rows;
}

describe.each(["postgres", "sqlite", "duckdb"])("%s target: a retyped column the state does not know", (kind) => {
  const database = `sync_retyped_${randomBytes(4).toString("hex")}`;
  let dir: string;
  let url: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sync-retyped-"));
    if (kind === "postgres") {
      await onItsOwnConnection(SERVER, `CREATE DATABASE ${database}`);
      url = databaseUrl(database);
    } else url = `${kind}:${join(dir, `copy.${kind}`)}`;
  });
  afterAll(async () => {
    if (kind === "postgres") await onItsOwnConnection(SERVER, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    rmSync(dir, { recursive: true, force: true });
  });

  it("is widened to text by what the table holds, and the page loads", async () => {
    // The failed pass: the table made from the listing before the retype; no state saved.
    const first = openTarget(url);
    await first.open({ writer: true });
    await first.ensureTable(BEFORE, {});
    await first.close();

    const target = openTarget(url);
    await target.open({ writer: true });
    try {
      const state: DatasetState = { ...newDatasetState(AFTER.table, AFTER.table), generation: 1, inProgress: true };
      state.columns = await target.ensureTable(AFTER, {});
      expect(state.columns.amount).toBe("text");
      expect(await writeOnePage(target, { ...AFTER, columns: state.columns }, state)).toBe(1);
    } finally {
      await target.close();
    }
    if (kind === "postgres") expect(await onItsOwnConnection(url, "SELECT amount FROM form_checks")).toEqual([{ amount: "raven 62" }]);
  });

  it("keeps a column that already has the listed type, and widens nothing else", async () => {
    const target = openTarget(url);
    await target.open({ writer: true });
    try {
      // The field retyped back to a number: the column holds text now, so it stays text (SQLite keeps
      // each value's own type: its columns are never altered, only the conversions follow the listing).
      const amount = kind === "sqlite" ? "number" : "text";
      expect(await target.ensureTable(BEFORE, {})).toEqual({ id: "uuid", last_modified: "dateTime", amount });
    } finally {
      await target.close();
    }
  });
});
