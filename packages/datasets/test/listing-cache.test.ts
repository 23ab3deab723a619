import { ListingCache } from "../src/listing-cache";

const ORG_A = "0d3e6f6a-5c1b-4d7e-9a42-3f0c1e2d9b10";
const ORG_B = "7b0c2f4e-1d3a-4c5b-8e6f-9a0b1c2d3e4f";
const bytes = (n: number) => [Buffer.alloc(n, 0x61)];

describe("ListingCache", () => {
  it("answers only for the exact version it was given", () => {
    const cache = new ListingCache(1024);
    cache.set(ORG_A, "5", '"v5"', bytes(10));
    expect(cache.get(ORG_A, "5")).toMatchObject({ etag: '"v5"', pieces: bytes(10) });
    expect(cache.get(ORG_A, "6")).toBeUndefined();
    expect(cache.get(ORG_B, "5")).toBeUndefined();
  });

  it("never lets an older version replace a newer one, nor a verdict drop the same version's pieces", () => {
    const cache = new ListingCache(1024);
    cache.set(ORG_A, "7", '"v7"', bytes(10));
    cache.set(ORG_A, "6", '"v6"', bytes(10));
    expect(cache.get(ORG_A, "6")).toBeUndefined();
    cache.set(ORG_A, "7", '"v7"');
    expect(cache.get(ORG_A, "7")?.pieces).toEqual(bytes(10));
    cache.set(ORG_A, "10", '"v10"');
    expect(cache.get(ORG_A, "7")).toBeUndefined();
    expect(cache.get(ORG_A, "10")).toEqual({ version: "10", etag: '"v10"', bytes: 0 });
  });

  it("keeps rendered pieces within the byte budget, dropping the least recently used ones but keeping their verdicts", () => {
    const cache = new ListingCache(100);
    cache.set(ORG_A, "1", '"a"', bytes(60));
    cache.set(ORG_B, "1", '"b"', bytes(60));
    expect(cache.get(ORG_A, "1")).toEqual({ version: "1", etag: '"a"', bytes: 0 });
    expect(cache.get(ORG_B, "1")?.pieces).toEqual(bytes(60));
    // Larger than the whole budget: only the verdict is kept.
    cache.set(ORG_A, "2", '"a2"', bytes(101));
    expect(cache.get(ORG_A, "2")).toEqual({ version: "2", etag: '"a2"', bytes: 0 });
    expect(cache.get(ORG_B, "1")?.pieces).toEqual(bytes(60));
    // A budget of 0 keeps verdicts only.
    const none = new ListingCache(0);
    none.set(ORG_A, "1", '"a"', bytes(1));
    expect(none.get(ORG_A, "1")).toEqual({ version: "1", etag: '"a"', bytes: 0 });
  });

  it("keeps a rendered listing's pieces from the second rendering at a version on", () => {
    const cache = new ListingCache(1024);
    cache.rendered(ORG_A, "3", '"v3"', bytes(10));
    expect(cache.get(ORG_A, "3")).toMatchObject({ etag: '"v3"', bytes: 0 });
    expect(cache.get(ORG_A, "3")?.pieces).toBeUndefined();
    cache.rendered(ORG_A, "3", '"v3"', bytes(10));
    expect(cache.get(ORG_A, "3")?.pieces).toEqual(bytes(10));
    // A new version starts over: its first rendering keeps only the verdict.
    cache.rendered(ORG_A, "4", '"v4"', bytes(10));
    expect(cache.get(ORG_A, "4")?.pieces).toBeUndefined();
    // A verdict from the cheap 304 before the first rendering does not count as one.
    cache.set(ORG_B, "1", '"b1"');
    cache.rendered(ORG_B, "1", '"b1"', bytes(10));
    expect(cache.get(ORG_B, "1")?.pieces).toBeUndefined();
    cache.rendered(ORG_B, "1", '"b1"', bytes(10));
    expect(cache.get(ORG_B, "1")?.pieces).toEqual(bytes(10));
  });
});
