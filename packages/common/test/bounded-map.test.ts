import { BoundedMap } from "../src/bounded-map";

describe("BoundedMap", () => {
  it("keeps at most max entries, forgetting the least recently set first", () => {
    const m = new BoundedMap<string, number>(2);
    m.set("a", 1);
    m.set("b", 2);
    m.set("a", 3); // set again: now the most recent
    m.set("c", 4);
    expect(m.get("b")).toBeUndefined();
    expect([m.get("a"), m.get("c"), m.size]).toEqual([3, 4, 2]);
    m.delete("a");
    expect([m.get("a"), m.size]).toEqual([undefined, 1]);
  });
});
