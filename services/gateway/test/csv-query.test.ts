import { parseCsvQuery } from "../src/csv/query";
import { parseInstantMicros } from "../src/csv/timestamp";
import { AppError } from "@exportsvc/common";

const micros = (iso: string, extraMicros = 0n) => BigInt(Date.parse(iso)) * 1000n + extraMicros;

function rejection(raw: Record<string, string | string[]>): AppError {
  try {
    parseCsvQuery(raw);
  } catch (err) {
    return err as AppError;
  }
  throw new Error("expected a rejection");
}

describe("parseInstantMicros", () => {
  it("reads the CSV's own dateTime form with microseconds", () => {
    expect(parseInstantMicros("2024-05-01 12:30:00.123456+00")).toBe(micros("2024-05-01T12:30:00.123Z", 456n));
  });

  it("reads CSV forms without fraction and with a short fraction", () => {
    expect(parseInstantMicros("2024-05-01 12:30:00+00")).toBe(micros("2024-05-01T12:30:00Z"));
    expect(parseInstantMicros("2024-05-01 12:30:00.5+00")).toBe(micros("2024-05-01T12:30:00.500Z"));
  });

  it("reads ISO 8601 with Z and with offsets", () => {
    expect(parseInstantMicros("2024-05-01T12:30:00Z")).toBe(micros("2024-05-01T12:30:00Z"));
    expect(parseInstantMicros("2024-05-01T14:30:00+02:00")).toBe(micros("2024-05-01T12:30:00Z"));
    expect(parseInstantMicros("2024-05-01T07:00:00-0530")).toBe(micros("2024-05-01T12:30:00Z"));
    expect(parseInstantMicros("2024-05-01T12:30Z")).toBe(micros("2024-05-01T12:30:00Z"));
  });

  it("truncates digits beyond microseconds (repeats a row rather than skipping one)", () => {
    expect(parseInstantMicros("2024-05-01T12:30:00.1234569Z")).toBe(micros("2024-05-01T12:30:00.123Z", 456n));
  });

  it("keeps years below 100 and dates before 1970", () => {
    // ISO strings with four-digit years parse literally (Date.UTC would map 50 to 1950).
    expect(parseInstantMicros("0050-06-01 00:00:00+00")).toBe(micros("0050-06-01T00:00:00Z"));
    expect(micros("0050-06-01T00:00:00Z")).toBeLessThan(micros("0100-01-01T00:00:00Z"));
    expect(parseInstantMicros("1969-12-31T23:59:59.999999Z")).toBe(-1n);
  });

  it.each([
    ["a raw + that arrived as a space", "2024-05-01 12:30:00.123456 00"],
    ["no offset", "2024-05-01 12:30:00"],
    ["a date only", "2024-05-01"],
    ["February 30", "2024-02-30T00:00:00Z"],
    ["hour 24", "2024-05-01T24:00:00Z"],
    ["garbage", "yesterday"],
    ["empty", ""],
  ])("rejects %s", (_name, text) => {
    expect(parseInstantMicros(text)).toBeUndefined();
  });

  it("accepts February 29 of a leap year only", () => {
    expect(parseInstantMicros("2024-02-29T00:00:00Z")).toBeDefined();
    expect(parseInstantMicros("2023-02-29T00:00:00Z")).toBeUndefined();
  });
});

describe("parseCsvQuery", () => {
  it("parses every parameter to the export request's types", () => {
    expect(
      parseCsvQuery({
        modifiedSince: "2024-05-01 12:30:00.123456+00",
        after: "0B6F2C5E-8D4A-4F7E-9C1B-2A3D4E5F6A7B",
        afterRowIndex: "3",
        limit: "250",
        from: "2024-01-01T00:00:00Z",
        to: "2024-02-01T00:00:00Z",
      }),
    ).toEqual({
      modifiedSinceMicros: micros("2024-05-01T12:30:00.123Z", 456n),
      after: "0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b",
      afterRowIndex: 3n,
      limit: 250,
      fromMicros: micros("2024-01-01T00:00:00Z"),
      toMicros: micros("2024-02-01T00:00:00Z"),
    });
  });

  it("passes the cursor through raw, the empty string included, and ignores unknown parameters", () => {
    expect(parseCsvQuery({ cursor: "", limitt: "x" })).toEqual({ cursor: "" });
    expect(parseCsvQuery({ cursor: "v1.abc+/=" })).toEqual({ cursor: "v1.abc+/=" });
  });

  it("leaves range checks to the export service (integer syntax is enough here)", () => {
    expect(parseCsvQuery({ limit: "0", afterRowIndex: "0" })).toEqual({ limit: 0, afterRowIndex: 0n });
    expect(parseCsvQuery({ limit: "999999" })).toEqual({ limit: 999999 });
  });

  it("names every unparsable parameter at once", () => {
    const error = rejection({
      limit: "ten",
      modifiedSince: "2024-05-01 12:30:00 00",
      after: "not-a-uuid",
      afterRowIndex: "1.5",
      from: "2024-13-01T00:00:00Z",
      to: "soon",
      cursor: "kept",
    });
    expect(error.status).toBe(400);
    expect(error.errorCode).toBe("INVALID_PARAMETER");
    expect(Object.keys(error.errors ?? {}).sort()).toEqual(["after", "afterRowIndex", "from", "limit", "modifiedSince", "to"]);
    expect(error.detail).toContain("modifiedSince");
  });

  it("rejects integers that do not fit the wire types and repeated parameters", () => {
    expect(rejection({ limit: "2147483648" }).errors).toEqual({ limit: ["must be a 32-bit integer"] });
    expect(rejection({ afterRowIndex: "9223372036854775808" }).errors).toEqual({ afterRowIndex: ["must be a 64-bit integer"] });
    expect(rejection({ limit: ["1", "2"] }).errors).toEqual({ limit: ["must be given at most once"] });
    expect(Object.keys(rejection({ limit: "", after: "" }).errors ?? {})).toEqual(["after", "limit"]);
  });
});
