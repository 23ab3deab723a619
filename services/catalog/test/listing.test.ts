import type { RegistryEntry } from "@exportsvc/datasets";
import { buildListing, changeToken } from "../src/listing";

const entry = (over: Partial<RegistryEntry> & Pick<RegistryEntry, "key" | "kind">): RegistryEntry => ({
  sourceRef: over.key,
  columns: [{ key: "id", dataType: "uuid", label: "ID", source: { kind: "core", name: "id" } }],
  shapeFingerprint: "fp",
  generation: 1,
  state: "ready",
  changeCounter: "0",
  ...over,
});

describe("buildListing (pure)", () => {
  const registry = [
    entry({ key: "zeta", kind: "submission", displayName: "zeta form" }),
    entry({ key: "deviations", kind: "deviations", displayName: "Deviations" }),
    entry({ key: "alpha", kind: "submission", displayName: "Alpha" }),
    entry({ key: "resources_lots", kind: "resource", displayName: "should not show" }),
    entry({ key: "alpha__rows", kind: "grid", displayName: "Alpha - Rows", parentKey: "alpha" }),
    entry({ key: "resources_suppliers", kind: "resource" }),
    entry({ key: "beta", kind: "submission", displayName: "Beta" }),
  ];

  it("orders fixed datasets first (definition order), then form datasets by display name, case-insensitively", () => {
    expect(buildListing(registry).datasets.map((d) => d.key)).toEqual([
      "resources_suppliers",
      "resources_lots",
      "deviations",
      "alpha",
      "alpha__rows",
      "beta",
      "zeta",
    ]);
  });

  it("never shows a display name on a resource dataset", () => {
    const lots = buildListing(registry).datasets.find((d) => d.key === "resources_lots")!;
    expect(lots).not.toHaveProperty("displayName");
    expect(lots).not.toHaveProperty("parentDataset");
  });

  it("derives the ETag from what is shown: order of input does not matter, a label does", () => {
    const a = buildListing(registry);
    const b = buildListing([...registry].reverse());
    expect(b.etag).toBe(a.etag);
    const relabelled = registry.map((e) =>
      e.key === "beta" ? { ...e, columns: [{ ...e.columns[0], label: "Identifier" }] } : e,
    );
    expect(buildListing(relabelled).etag).not.toBe(a.etag);
  });

  it("changes the token with the counter, generation or shape and nothing else", () => {
    const base = entry({ key: "k", kind: "submission", displayName: "K" });
    const token = changeToken(base);
    expect(changeToken({ ...base, displayName: "Renamed", columns: [] })).toBe(token);
    expect(changeToken({ ...base, changeCounter: "1" })).not.toBe(token);
    expect(changeToken({ ...base, generation: 2 })).not.toBe(token);
    expect(changeToken({ ...base, shapeFingerprint: "other" })).not.toBe(token);
    expect(token).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });
});
