import { randomUUID } from "node:crypto";
import { CURRENT_CURSOR_VERSION, CursorCodec, CursorKeyring, PG_EPOCH_OFFSET_MICROS, type CursorPosition } from "../src/cursor";

const keyring = CursorKeyring.parse("5:first-secret-0123456789,6:second-secret-0123456789");
const codec = new CursorCodec({ keyring });
const binding = { organizationId: "0b0b0b0b-0000-4000-8000-0000000000a1", datasetKey: "resources_suppliers", rowShape: "abc123" };
const position: CursorPosition = { lastModifiedMicros: 1_710_058_530_123_456n, id: randomUUID(), rowIndex: 7 };

describe("CursorKeyring.parse", () => {
  it("reads id:secret entries, first one signs", () => {
    expect(keyring.signing.id).toBe(5);
    expect(keyring.get(6)?.secret.toString()).toBe("second-secret-0123456789");
    expect(keyring.get(7)).toBeUndefined();
  });

  it.each([
    ["", /at least one key/],
    ["x:0123456789abcdef", /integer id/],
    ["256:0123456789abcdef", /0-255/],
    ["1:short", /at least 16/],
    ["1:0123456789abcdef,1:0123456789abcdefg", /twice/],
  ])("rejects %p", (spec, message) => {
    expect(() => CursorKeyring.parse(spec)).toThrow(message);
  });
});

describe("CursorCodec", () => {
  const cursor = codec.encode(position, binding);

  it("is standard base64 with padding, and round-trips the position", () => {
    expect(cursor).toMatch(/^[A-Za-z0-9+/]{62}==$/);
    const parsed = codec.parse(cursor);
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(parsed.cursor.position).toEqual(position);
    expect(parsed.cursor.keyId).toBe(5);
    expect(codec.verify(parsed.cursor, binding)).toBe(true);
  });

  it("stores last_modified as PostgreSQL's own microseconds since 2000-01-01", () => {
    const bytes = Buffer.from(cursor, "base64");
    expect(bytes.readBigInt64BE(2)).toBe(position.lastModifiedMicros - PG_EPOCH_OFFSET_MICROS);
  });

  it("binds the organization, the dataset key and the row shape through the MAC only", () => {
    const parsed = codec.parse(cursor);
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(codec.verify(parsed.cursor, { ...binding, organizationId: "0b0b0b0b-0000-4000-8000-0000000000a2" })).toBe(false);
    expect(codec.verify(parsed.cursor, { ...binding, organizationId: binding.organizationId.toUpperCase() })).toBe(true);
    expect(codec.verify(parsed.cursor, { ...binding, datasetKey: "resources_customers" })).toBe(false);
    expect(codec.verify(parsed.cursor, { ...binding, rowShape: "other" })).toBe(false);
    expect(cursor).toBe(codec.encode(position, { ...binding }));
  });

  it("tells the malformed cases apart", () => {
    expect(codec.parse("")).toEqual({ ok: false, problem: "empty" });
    expect(codec.parse("hello world")).toEqual({ ok: false, problem: "not_a_cursor" });
    expect(codec.parse(Buffer.from("not a cursor at all, really").toString("base64"))).toEqual({ ok: false, problem: "not_a_cursor" });
    expect(codec.parse(cursor.slice(0, -2))).toEqual({ ok: false, problem: "truncated" });
    expect(codec.parse(cursor.slice(0, 40))).toEqual({ ok: false, problem: "truncated" });
    expect(codec.parse(`${cursor.slice(0, -2)}AAAA`)).toEqual({ ok: false, problem: "altered" });
  });

  it("detects a single altered character through the MAC", () => {
    const i = 20;
    const altered = cursor.slice(0, i) + (cursor[i] === "A" ? "B" : "A") + cursor.slice(i + 1);
    const parsed = codec.parse(altered);
    expect(parsed.ok && codec.verify(parsed.cursor, binding)).toBe(false);
  });

  it("issues the current version, which binds the organization", () => {
    expect(CURRENT_CURSOR_VERSION).toBe(2);
    expect(Buffer.from(cursor, "base64")[0]).toBe(CURRENT_CURSOR_VERSION);
  });

  it("refuses version 1 cursors (issued before the organization was bound) as retired", () => {
    const v1 = new CursorCodec({ keyring, version: 1 }).encode(position, binding);
    expect(codec.parse(v1)).toEqual({ ok: false, problem: "retired_version" });
  });

  it("refuses cursors of a retired version once the version moves on", () => {
    const next = new CursorCodec({ keyring, version: CURRENT_CURSOR_VERSION + 1 });
    expect(next.parse(cursor)).toEqual({ ok: false, problem: "retired_version" });
    const fresh = next.encode(position, binding);
    expect(next.parse(fresh).ok).toBe(true);
  });

  it("verifies with every key of the ring and refuses a removed key", () => {
    const rotated = new CursorCodec({ keyring: CursorKeyring.parse("6:second-secret-0123456789,5:first-secret-0123456789") });
    const parsed = rotated.parse(cursor);
    expect(parsed.ok && rotated.verify(parsed.cursor, binding)).toBe(true);
    const removed = new CursorCodec({ keyring: CursorKeyring.parse("6:second-secret-0123456789") });
    expect(removed.parse(cursor)).toEqual({ ok: false, problem: "unknown_signing_key" });
  });

  it("builds its SQL only from hex literals and the given column expressions", () => {
    const sql = codec.sqlExpression(binding, { lastModified: "r.last_modified", id: "r.id" });
    expect(sql).not.toContain("first-secret");
    expect(sql).not.toContain(Buffer.from("first-secret").toString("hex"));
    // One SHA-256 per row: the single-block keyed hash, not HMAC's nested pair.
    expect(sql.match(/sha256\(/g)).toHaveLength(1);
    expect(sql.replace(/'\\x[0-9a-f]+'::bytea/g, "").replace("'base64'", "")).not.toContain("'");
    expect(sql).toContain("timestamptz_send(r.last_modified)");
  });
});
