import {
  EMPTY_NAME,
  assignDatasetKeys,
  assignUniqueNames,
  composedName,
  directName,
  hash8,
  hashedDatasetKey,
  normalizeName,
} from "../src";

describe("normalizeName", () => {
  it.each([
    ["Row Index", "row_index"],
    ["Supplier-Name", "supplier_name"],
    ["Temperature (°C)", "temperature_c"],
    ["a  -  b", "a_b"],
    ["A__B", "a_b"],
    ["Déjà vu!", "dj_vu"],
    ["  Daily Check  ", "daily_check"],
    ["_internal", "_internal"],
    ["batch #2", "batch_2"],
  ])("%j -> %j", (raw, expected) => {
    expect(normalizeName(raw)).toBe(expected);
  });

  it("turns a name with nothing left into the documented placeholder", () => {
    expect(normalizeName("!!!")).toBe(EMPTY_NAME);
    expect(normalizeName("")).toBe(EMPTY_NAME);
    expect(EMPTY_NAME).toBe("unnamed");
  });
});

describe("directName", () => {
  it("truncates without a hash", () => {
    const raw = "A very long form name ".repeat(5);
    const name = directName(raw);
    expect(name).toHaveLength(63);
    expect(name).toBe(normalizeName(raw).slice(0, 63));
  });
});

describe("composedName", () => {
  it("joins parts with __ and prefix/suffix with _", () => {
    expect(composedName(["Daily Check", "Temperatures"])).toBe("daily_check__temperatures");
    expect(composedName({ parts: ["Allergens"], prefix: "verification" })).toBe("verification_allergens");
    expect(composedName({ parts: ["Supplier"], suffix: "id" })).toBe("supplier_id");
    expect(composedName({ parts: ["Checks", "Clean?"] })).toBe("checks__clean");
  });

  it("appends a hash of the full name when it overflows, eating into the visible part", () => {
    const parts = ["x".repeat(40), "y".repeat(40)];
    const full = `${"x".repeat(40)}__${"y".repeat(40)}`;
    const name = composedName(parts);
    expect(name).toHaveLength(63);
    expect(name).toBe(`${full.slice(0, 54)}_${hash8(full)}`);
  });

  it("keeps names that differ only beyond the cut apart", () => {
    const a = composedName(["x".repeat(60), "a"]);
    const b = composedName(["x".repeat(60), "b"]);
    expect(a).not.toBe(b);
    expect(a.slice(0, 54)).toBe(b.slice(0, 54));
  });

  it("treats a single-part name as composed (custom attribute columns)", () => {
    const key = "k".repeat(70);
    expect(composedName([key])).toBe(`${"k".repeat(54)}_${hash8(key)}`);
  });

  it("is exactly 63 characters at the boundary and unhashed below it", () => {
    expect(composedName(["a".repeat(30), "b".repeat(31)])).toHaveLength(63);
    expect(composedName(["a".repeat(30), "b".repeat(31)])).not.toMatch(/_[0-9a-f]{8}$/);
  });
});

describe("hash8", () => {
  it("is 8 lowercase hex characters and deterministic", () => {
    expect(hash8("abc")).toMatch(/^[0-9a-f]{8}$/);
    expect(hash8("abc")).toBe(hash8("abc"));
    expect(hash8("abc")).not.toBe(hash8("abd"));
    // SHA-256("abc") starts with ba7816bf.
    expect(hash8("abc")).toBe("ba7816bf");
  });
});

describe("assignUniqueNames", () => {
  const reservedResource = ["id", "name", "last_modified", "row_index", "row_seq", "_cursor"];

  it("gives 'Row Index' from a custom attribute row_index_2", () => {
    const names = assignUniqueNames([{ sourceId: "a1", name: composedName(["Row Index"]) }], { reserved: reservedResource });
    expect(names.get("a1")).toBe("row_index_2");
  });

  it("suffixes a clash with a core column", () => {
    const names = assignUniqueNames([{ sourceId: "a1", name: "name" }], { reserved: reservedResource });
    expect(names.get("a1")).toBe("name_2");
  });

  it("gives the plain name to the candidate processed first, then _2, _3", () => {
    const names = assignUniqueNames([
      { sourceId: "a", name: "color" },
      { sourceId: "b", name: "color" },
      { sourceId: "c", name: "color" },
    ]);
    expect([...names.values()]).toEqual(["color", "color_2", "color_3"]);
  });

  it("keeps previous assignments stable when an earlier candidate appears", () => {
    const first = assignUniqueNames([{ sourceId: "b", name: "color" }]);
    const second = assignUniqueNames(
      [
        { sourceId: "a", name: "color" },
        { sourceId: "b", name: "color" },
      ],
      { previous: first },
    );
    expect(second.get("b")).toBe("color");
    expect(second.get("a")).toBe("color_2");
  });

  it("keeps a suffixed name after the plain holder disappears", () => {
    const first = assignUniqueNames([
      { sourceId: "a", name: "color" },
      { sourceId: "b", name: "color" },
    ]);
    const second = assignUniqueNames([{ sourceId: "b", name: "color" }], { previous: first });
    expect(second.get("b")).toBe("color_2");
  });

  it("drops a previous assignment when the source's name changed", () => {
    const names = assignUniqueNames([{ sourceId: "a", name: "colour" }], { previous: { a: "color" } });
    expect(names.get("a")).toBe("colour");
  });

  it("drops a previous assignment that became reserved", () => {
    const names = assignUniqueNames([{ sourceId: "a", name: "status" }], { previous: { a: "status" }, reserved: ["status"] });
    expect(names.get("a")).toBe("status_2");
  });

  it("lets a candidate literally named x_2 keep it", () => {
    const names = assignUniqueNames([
      { sourceId: "a", name: "x" },
      { sourceId: "b", name: "x" },
      { sourceId: "c", name: "x_2" },
    ]);
    expect(names.get("c")).toBe("x_2");
    expect(names.get("b")).toBe("x_3");
  });

  it("truncates the base so a suffix never passes 63 characters", () => {
    const long = "l".repeat(63);
    const names = assignUniqueNames([
      { sourceId: "a", name: long },
      { sourceId: "b", name: long },
    ]);
    expect(names.get("a")).toBe(long);
    expect(names.get("b")).toBe(`${"l".repeat(61)}_2`);
  });

  it("separates long names truncating to the same 63 characters", () => {
    const names = assignUniqueNames([
      { sourceId: "a", name: directName(`${"q".repeat(63)}a`) },
      { sourceId: "b", name: directName(`${"q".repeat(63)}b`) },
    ]);
    expect(names.get("b")).toBe(`${"q".repeat(61)}_2`);
  });
});

describe("assignDatasetKeys", () => {
  it("gives the plain name to the first, a form-id hash to the next", () => {
    const keys = assignDatasetKeys([
      { sourceId: "form-1", name: "audit", hashInput: "form-1" },
      { sourceId: "form-2", name: "audit", hashInput: "form-2" },
    ]);
    expect(keys.get("form-1")).toBe("audit");
    expect(keys.get("form-2")).toBe(`audit_${hash8("form-2")}`);
  });

  it("keeps the plain name with its first holder permanently", () => {
    const keys = assignDatasetKeys(
      [
        { sourceId: "form-2", name: "audit", hashInput: "form-2" },
        { sourceId: "form-1", name: "audit", hashInput: "form-1" },
      ],
      { previous: { "form-1": "audit" }, taken: ["audit", "deviations"] },
    );
    expect(keys.get("form-1")).toBe("audit");
    expect(keys.get("form-2")).toBe(`audit_${hash8("form-2")}`);
  });

  it("never reuses a fixed or retired key", () => {
    const keys = assignDatasetKeys([{ sourceId: "form-3", name: "deviations", hashInput: "form-3" }], {
      taken: ["deviations"],
    });
    expect(keys.get("form-3")).toBe(`deviations_${hash8("form-3")}`);
  });

  it("adds a numeric suffix when the hashed key collides too", () => {
    const hashed = hashedDatasetKey("audit", "same");
    const keys = assignDatasetKeys(
      [
        { sourceId: "a", name: "audit", hashInput: "same" },
        { sourceId: "b", name: "audit", hashInput: "same" },
      ],
      { taken: ["audit"] },
    );
    expect(keys.get("a")).toBe(hashed);
    expect(keys.get("b")).toBe(`${hashed}_2`);
  });

  it("moves a renamed dataset to a new key", () => {
    const keys = assignDatasetKeys([{ sourceId: "form-1", name: "audit_v2", hashInput: "form-1" }], {
      previous: { "form-1": "audit" },
      taken: ["audit"],
    });
    expect(keys.get("form-1")).toBe("audit_v2");
  });

  it("stays within 63 characters for long names", () => {
    const long = "n".repeat(63);
    const keys = assignDatasetKeys([{ sourceId: "f", name: long, hashInput: "f" }], { taken: [long] });
    expect(keys.get("f")).toBe(`${"n".repeat(54)}_${hash8("f")}`);
  });
});
