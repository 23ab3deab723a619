/**
 * A page whose statement is decided on its own connection (a rendered dataset's state) reads that
 * state and its rows in one snapshot, and never gives a connection with an open transaction back to
 * the pool: committed after a whole page, destroyed when the decision fails.
 */
import type { Pool } from "pg";
import { createPool } from "@exportsvc/db";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { copyToSink, type ChunkSink } from "../src/copy-stream";

/** A sink that takes every chunk at once and keeps it. */
function memorySink(): ChunkSink & { text(): string } {
  const chunks: Buffer[] = [];
  return {
    write: (chunk) => {
      chunks.push(chunk);
      return true;
    },
    drained: async () => undefined,
    gone: new Promise<void>(() => undefined),
    isGone: () => false,
    text: () => Buffer.concat(chunks).toString("utf8"),
  };
}

const OPTIONS = { chunkBytes: 64 * 1024, stallTimeoutMs: 10_000 };

let admin: Pool;
let pages: Pool;
let org: string;

beforeAll(async () => {
  admin = testPool();
  // One connection: every page and check below runs on the same backend.
  pages = createPool({ connectionString: testDatabaseUrl(), max: 1 });
  org = await createTestOrganization(admin);
  await admin.query("INSERT INTO products (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'first')", [org]);
});

afterAll(async () => {
  await pages.end();
  await admin.end();
});

/** The organization's product names, in order (the organization id is a UUID the test made: safe as a literal). */
const productNames = (organizationId: string) => `SELECT name FROM products WHERE organization_id = '${organizationId}' ORDER BY name`;

describe("a page's statement decided in its snapshot", () => {
  it("reads the rows of the snapshot its decision read, not what committed in between", async () => {
    const sink = memorySink();
    const outcome = await copyToSink(
      pages,
      async (db) => {
        const { rows } = await db.query("SELECT count(*)::int AS n FROM products WHERE organization_id = $1", [org]);
        // Committed after the snapshot was taken (by the statement above): the page must not show it.
        await admin.query("INSERT INTO products (organization_id, id, name) VALUES ($1, gen_random_uuid(), 'second')", [org]);
        return { select: `${productNames(org)} LIMIT ${rows[0].n + 1}`, format: "csv" };
      },
      Buffer.from("name\n"),
      sink,
      OPTIONS,
    );
    expect(outcome).toMatchObject({ rows: 1, cancelled: false });
    expect(sink.text()).toBe("name\nfirst\n");
    // The next page sees it; and the connection came back committed, not inside the page's transaction.
    const next = memorySink();
    await copyToSink(pages, { select: productNames(org), format: "csv" }, Buffer.alloc(0), next, OPTIONS);
    expect(next.text()).toBe("first\nsecond\n");
    const { rows } = await pages.query("SELECT current_setting('transaction_isolation') AS isolation, now() = statement_timestamp() AS own_transaction");
    expect(rows[0]).toEqual({ isolation: "read committed", own_transaction: true });
  });

  it("a decision that fails destroys the connection with its transaction; the error reaches the caller", async () => {
    const before = await pages.query("SELECT pg_backend_pid() AS pid");
    await expect(
      copyToSink(
        pages,
        async () => {
          throw new Error("no statement for this page");
        },
        Buffer.alloc(0),
        memorySink(),
        OPTIONS,
      ),
    ).rejects.toThrow("no statement for this page");
    const after = await pages.query("SELECT pg_backend_pid() AS pid, current_setting('transaction_isolation') AS isolation");
    expect(after.rows[0].pid).not.toBe(before.rows[0].pid);
    expect(after.rows[0].isolation).toBe("read committed");
  });
});
