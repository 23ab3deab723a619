import { DECLARED_ORGANIZATION_SQL_PATTERN, declaredWriterApplicationName } from "../src/writer-declaration";

describe("declaredWriterApplicationName", () => {
  const org = "0F6B2C1E-8A4D-4C3B-9E2F-1A2B3C4D5E6F";
  const captured = (name: string) => new RegExp(DECLARED_ORGANIZATION_SQL_PATTERN).exec(name)?.[1];

  it("appends ' org=<uuid>' (lower case), which the horizon's SQL pattern captures", () => {
    const name = declaredWriterApplicationName("exportctl", org);
    expect(name).toBe(`exportctl org=${org.toLowerCase()}`);
    expect(captured(name)).toBe(org.toLowerCase());
  });

  it("fits PostgreSQL's 63 bytes by shortening the prefix, never the uuid", () => {
    const name = declaredWriterApplicationName("a-very-long-application-name-that-goes-on-and-on", org);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63);
    expect(captured(name)).toBe(org.toLowerCase());
  });

  it("replaces an earlier declaration instead of stacking two, and drops non-ASCII", () => {
    const other = "11111111-2222-4333-8444-555555555555";
    const name = declaredWriterApplicationName(`impörter org=${other}`, org);
    expect(name).toBe(`imprter org=${org.toLowerCase()}`);
  });

  it("refuses anything but an organization uuid", () => {
    expect(() => declaredWriterApplicationName("x", "not-a-uuid")).toThrow(/organization id/);
  });

  it("an undeclared name is not captured", () => {
    expect(captured("bi-dashboard")).toBeUndefined();
    expect(captured("psql org=")).toBeUndefined();
  });
});
