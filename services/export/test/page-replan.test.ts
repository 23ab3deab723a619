/**
 * A page planned on a rendered dataset's state that PostgreSQL refuses as stale (the guard of
 * migration 135 fails before the first row) is planned again and COPYed on the same connection,
 * its bytes the new plan's only; any other failure reaches the caller and costs the connection.
 */
import type { Pool } from "pg";
import { createPool } from "@exportsvc/db";
import { createTestOrganization, testDatabaseUrl, testPool } from "../../../test/support/db";
import { copyToSink, type ChunkSink, type CopyStatement } from "../src/copy-stream";

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

/**
 * The organization's product names, in order (the organization id is a UUID the test made: safe as a
 * literal); with `guardHolds`, behind the rendered pages' guard, which refuses the statement when false.
 */
const productNames = (organizationId: string, guardHolds?: boolean) =>
  `SELECT name FROM products WHERE organization_id = '${organizationId}'${guardHolds === undefined ? "" : ` AND rendered_page_guard(${guardHolds})`} ORDER BY name`;

const backendPid = async () => (await pages.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;

describe("a page planned again when its plan is refused as stale", () => {
  it("COPYs the new plan on the same connection; only its bytes reach the sink", async () => {
    const pid = await backendPid();
    const replans: string[] = [];
    const fresh: CopyStatement = { select: productNames(org, true), format: "csv" };
    const stale: CopyStatement = {
      select: productNames(org, false),
      format: "csv",
      replan: async () => {
        replans.push("replanned");
        return fresh;
      },
    };
    const sink = memorySink();
    const outcome = await copyToSink(pages, stale, Buffer.from("name\n"), sink, OPTIONS);
    expect(replans).toEqual(["replanned"]);
    expect(outcome).toMatchObject({ rows: 1, cancelled: false });
    expect(sink.text()).toBe("name\nfirst\n");
    expect(await backendPid()).toBe(pid);
  });

  it("plans as many times as the plans are refused, until one without a replan fails for good", async () => {
    let replans = 0;
    const refused = (left: number): CopyStatement => ({ select: productNames(org, false), format: "csv", ...(left > 0 ? { replan: async () => (replans++, refused(left - 1)) } : {}) });
    await expect(copyToSink(pages, refused(2), Buffer.alloc(0), memorySink(), OPTIONS)).rejects.toMatchObject({ code: "XR001" });
    expect(replans).toBe(2);
  });

  it("any other failure is not planned again: it reaches the caller and the connection is destroyed", async () => {
    const pid = await backendPid();
    let replanned = false;
    const failing: CopyStatement = {
      select: `SELECT 'not a number'::int`,
      format: "csv",
      replan: async () => {
        replanned = true;
        return { select: productNames(org, true), format: "csv" };
      },
    };
    await expect(copyToSink(pages, failing, Buffer.alloc(0), memorySink(), OPTIONS)).rejects.toThrow(/invalid input syntax/);
    expect(replanned).toBe(false);
    expect(await backendPid()).not.toBe(pid);
    // The pool's next page runs as usual.
    const sink = memorySink();
    await copyToSink(pages, { select: productNames(org), format: "csv" }, Buffer.alloc(0), sink, OPTIONS);
    expect(sink.text()).toBe("first\n");
  });
});
