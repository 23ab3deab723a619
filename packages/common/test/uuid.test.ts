import { isUuid, leadingUuid, UUID_TEXT_PATTERN } from "../src/uuid";

describe("the uuid check", () => {
  it("accepts the canonical 8-4-4-4-12 form in either case", () => {
    expect(isUuid("0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b")).toBe(true);
    expect(isUuid("0B6F2C5E-8D4A-4F7E-9C1B-2A3D4E5F6A7B")).toBe(true);
  });

  it("refuses the other forms PostgreSQL would parse, and anything around a uuid", () => {
    for (const value of [
      "",
      "0b6f2c5e8d4a4f7e9c1b2a3d4e5f6a7b",
      "{0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b}",
      " 0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b",
      "0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b\n",
      "0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7g",
      "0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7",
    ]) {
      expect({ value, accepted: isUuid(value) }).toEqual({ value, accepted: false });
    }
  });

  it("finds the uuid a source reference starts with, lower-cased", () => {
    expect(leadingUuid("0B6F2C5E-8D4A-4F7E-9C1B-2A3D4E5F6A7B/rows")).toBe("0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b");
    expect(leadingUuid("suppliers")).toBeNull();
    expect(leadingUuid("x0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b")).toBeNull();
  });

  it("gives PostgreSQL patterns the same text (lower-case hex, no anchors)", () => {
    expect(new RegExp(`^${UUID_TEXT_PATTERN}$`).test("0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b")).toBe(true);
    expect(UUID_TEXT_PATTERN.startsWith("^") || UUID_TEXT_PATTERN.endsWith("$")).toBe(false);
  });
});
