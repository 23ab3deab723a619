import fc from "fast-check";
import type { Pool } from "pg";
import { dateLikeTextSql, isDataException } from "../src";
import { testPool } from "./support";

// The rebuild converts dates optimistically (LIKE + round trip, no regex) and falls back to the
// guarded conversions when a statement raises; maintenance always uses the guarded ones. Both must
// print the same text for every stored value, or a rebuild and an edit would disagree.
let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(async () => {
  await pool.end();
});

type Kind = "date" | "dateTime" | "localDateTime";

async function convert(kind: Kind, value: string, conv: "guarded" | "optimistic"): Promise<{ text: string | null } | { raised: string }> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'");
    const r = await client.query<{ t: string | null }>(`SELECT ${dateLikeTextSql(kind, "$1::text", conv, "'Europe/Berlin'")} AS t`, [value]);
    return { text: r.rows[0].t };
  } catch (err) {
    return { raised: (err as { code?: string }).code ?? String(err) };
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
    client.release();
  }
}

/** Canonical values with characters swapped for look-alikes PostgreSQL's parser may or may not take. */
const nearMiss = (canonical: string) =>
  fc
    .array(fc.record({ at: fc.nat({ max: canonical.length - 1 }), ch: fc.constantFrom("0", "1", "2", "3", "9", " ", "+", "-", ":", ".", "T", "Z", "z", "a", "٣") }), {
      maxLength: 2,
    })
    .map((edits) => edits.reduce((s, e) => s.slice(0, e.at) + e.ch + s.slice(e.at + 1), canonical));

const instants = fc.oneof(
  fc.date({ min: new Date("0900-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59Z"), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.date({ min: new Date("1000-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59Z"), noInvalidDate: true }).map((d) => d.toISOString().replace(/\.\d{3}Z$/, "Z")),
  nearMiss("2024-03-01T10:00:00Z"),
  nearMiss("2024-02-29T23:59:59.120Z"),
  fc.constantFrom("2024-02-30T10:00:00Z", "2023-02-29T00:00:00Z", "2024-13-01T00:00:00Z", "0000-01-01T00:00:00Z", "2024-03-01T24:00:00Z", "2024-03-01T10:00:60Z", "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:00.100Z", "2024-03-01T10:00:00+01:00", "today"),
);
const dates = fc.oneof(
  fc.date({ min: new Date("0900-01-01T00:00:00Z"), max: new Date("9999-12-31T00:00:00Z"), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10)),
  nearMiss("2024-03-01"),
  nearMiss("2023-12-31"),
  fc.constantFrom("2023-02-29", "2024-02-30", "2024-00-10", "0000-01-01", "2024-1-5", "epoch"),
);

describe("optimistic date conversions agree with the guarded ones", () => {
  it.each<[Kind, fc.Arbitrary<string>]>([
    ["dateTime", instants],
    ["localDateTime", instants],
    ["date", dates],
  ])("%s: the optimistic text equals the guarded text, or the statement raises a data exception", async (kind, values) => {
    let agreed = 0;
    let raised = 0;
    await fc.assert(
      fc.asyncProperty(values, async (value) => {
        const guarded = await convert(kind, value, "guarded");
        expect(guarded).toHaveProperty("text"); // the guarded path never raises
        const optimistic = await convert(kind, value, "optimistic");
        if ("raised" in optimistic) {
          expect(isDataException({ code: optimistic.raised })).toBe(true);
          raised++;
        } else {
          expect(optimistic).toEqual(guarded);
          agreed++;
        }
      }),
      { numRuns: 300 },
    );
    // Both outcomes occur, so neither branch is vacuous.
    expect(agreed).toBeGreaterThan(100);
    expect(raised).toBeGreaterThan(0);
  });

  it("canonical values take the optimistic shape and print as PostgreSQL does", async () => {
    expect(await convert("dateTime", "2024-03-01T10:00:00.120Z", "optimistic")).toEqual({ text: "2024-03-01 10:00:00.12+00" });
    expect(await convert("dateTime", "2024-03-01T10:00:00.000Z", "optimistic")).toEqual({ text: "2024-03-01 10:00:00+00" });
    expect(await convert("localDateTime", "2024-07-01T10:00:00Z", "optimistic")).toEqual({ text: "2024-07-01 12:00:00" });
    expect(await convert("date", "2024-02-29", "optimistic")).toEqual({ text: "2024-02-29" });
    expect(await convert("date", "2023-02-29", "optimistic")).toEqual({ raised: "22008" });
  });
});
