/**
 * The PostgreSQL target's appended page tells the engine as soon as it has seen every record of the
 * body (RawPageWrite.recordsSeen), before the COPY has loaded them all and before the page commits:
 * the engine asks for the next page then (docs/sync-client.md, "Appending"). A body cut short never
 * reports its records seen; a page refused while its body still arrives is refused (AppendRefused),
 * not taken for a body cut short. Needs a PostgreSQL server: DATABASE_URL (default the local one).
 */
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { newDatasetState, type DatasetState } from "../src/state";
import { PostgresTarget } from "../src/targets/postgres";
import { AppendRefused, type RawPageWrite, type TablePlan } from "../src/targets/target";
import { databaseUrl, onItsOwnConnection as run, SERVER } from "./postgres-admin";

const PLAN: TablePlan = { table: "resources_products", keyColumns: ["id"], columns: { id: "uuid", last_modified: "dateTime", name: "text" } };
const HEADER = ["id", "last_modified", "name", "_cursor"];
const ROWS = 20_000;
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
/** ~1.5 MB of records: more than the stream buffers between the body and COPY hold without the read-ahead. */
const page = Array.from({ length: ROWS }, (_, i) => `${id(i)},2024-01-01T00:00:00.000Z,"product ${i}, ${"x".repeat(20)}",cursor${i}\n`).join("");

describe("PostgreSQL target: an appended page's records seen before they are written", () => {
  const database = `sync_read_ahead_${randomBytes(4).toString("hex")}`;
  const url = databaseUrl(database);
  let target: PostgresTarget;
  let state: DatasetState;

  beforeAll(() => run(SERVER, `CREATE DATABASE ${database}`));
  afterAll(() => run(SERVER, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
  beforeEach(async () => {
    target = new PostgresTarget(url);
    await target.open({ writer: true });
    state = { ...newDatasetState(PLAN.table, PLAN.table), generation: 1, inProgress: true };
    state.columns = await target.ensureTable(PLAN, {});
    state = { ...state, appending: await target.startAppend!(PLAN, state.key) };
  });
  afterEach(async () => {
    await target.close();
    await run(url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  });

  function write(records: Readable, events: string[]): RawPageWrite {
    return {
      plan: PLAN,
      header: HEADER,
      records,
      assertCleanEnd: () => undefined,
      cursorColumn: 3,
      generation: state.generation,
      append: state.appending,
      stateAfter: ({ rows, lastCursor }) => {
        events.push(`state after ${rows} ${lastCursor}`);
        return (state = { ...state, cursor: lastCursor ?? state.cursor, rowsUpserted: state.rowsUpserted + rows });
      },
      recordsSeen: ({ rows, lastCursor }) => events.push(`seen ${rows} ${lastCursor}`),
    };
  }

  it("reports the records seen, with their count and last cursor, before the page's state is written", async () => {
    expect(state.appending).toBe(true);
    const events: string[] = [];
    // The body in 64 KiB chunks, as a socket hands it over.
    const bytes = Buffer.from(page);
    const chunks = Array.from({ length: Math.ceil(bytes.length / 65536) }, (_, i) => bytes.subarray(i * 65536, (i + 1) * 65536));
    const { rows } = await target.writeRawPage!(write(Readable.from(chunks), events));
    expect(rows).toBe(ROWS);
    expect(events).toEqual([`seen ${ROWS} cursor${ROWS - 1}`, `state after ${ROWS} cursor${ROWS - 1}`]);
    expect(await target.countRows(PLAN.table)).toBe(ROWS);
  });

  it("refuses an appended page meeting a stored key while its body is still arriving as AppendRefused, not as a body cut short", async () => {
    // The key built (as when a read meets a stored key), one row stored; the next page repeats it first.
    await target.finishDataset({ plan: PLAN, state, sweepBelowGeneration: null });
    await target.writeRawPage!(write(Readable.from([Buffer.from(page.slice(0, page.indexOf("\n") + 1))]), []));
    const bytes = Buffer.from(page);
    // The body as a socket hands it over: 64 KiB chunks, a few milliseconds apart.
    async function* arriving() {
      for (let i = 0; i * 65536 < bytes.length; i++) {
        yield bytes.subarray(i * 65536, (i + 1) * 65536);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    const records = Readable.from(arriving());
    const refused = target.writeRawPage!({
      ...write(records, []),
      assertCleanEnd: () => {
        if (!records.readableEnded) throw new Error("the body was not read to its end");
      },
    });
    await expect(refused).rejects.toBeInstanceOf(AppendRefused);
    expect(await target.countRows(PLAN.table)).toBe(1);
  });

  it("never reports a body cut short inside a record as seen", async () => {
    const events: string[] = [];
    const cut = page.slice(0, page.length - 5);
    await expect(target.writeRawPage!(write(Readable.from([Buffer.from(cut)]), events))).rejects.toThrow();
    expect(events).toEqual([]);
  });
});
