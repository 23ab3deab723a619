import { createHash } from "node:crypto";
import type { ListingHorizon, RegistryEntry } from "@exportsvc/datasets";
import { buildListing, changeToken, renderEntry, rewriteToken, tokenVisibility, versionEtag } from "../src/listing";

const entry = (over: Partial<RegistryEntry> & Pick<RegistryEntry, "key" | "kind">): RegistryEntry => ({
  sourceRef: over.key,
  columns: [{ key: "id", dataType: "uuid", label: "ID", source: { kind: "core", name: "id" } }],
  shapeFingerprint: "fp",
  generation: 1,
  state: "ready",
  changeCounter: "0",
  rewriteCounter: "0",
  datasetRewriteCounter: "0",
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

  it("renders each entry as the API shows it: fields in order, absent values omitted, never null", () => {
    const listing = buildListing(registry);
    const suppliers = listing.datasets.find((d) => d.key === "resources_suppliers")!;
    expect(renderEntry(suppliers)).toBe(
      JSON.stringify({
        key: "resources_suppliers",
        childDatasets: [],
        columns: [
          { key: "id", dataType: "uuid", label: "ID" },
          { key: "_cursor", dataType: "text" },
        ],
        links: { csv: "/v1/datasets/resources_suppliers/csv", deletions: "/v1/datasets/resources_suppliers/deletions", rewrites: "/v1/datasets/resources_suppliers/rewrites" },
        changeToken: suppliers.changeToken,
        rewriteToken: suppliers.rewriteToken,
      }),
    );
    const rows = JSON.parse(renderEntry(listing.datasets.find((d) => d.key === "alpha__rows")!));
    expect(Object.keys(rows)).toEqual(["key", "displayName", "parentDataset", "childDatasets", "columns", "links", "changeToken", "rewriteToken"]);
    expect(rows).toMatchObject({ displayName: "Alpha - Rows", parentDataset: "alpha" });
    expect(JSON.parse(renderEntry(listing.datasets.find((d) => d.key === "alpha")!)).childDatasets).toEqual(["alpha__rows"]);
    for (const d of listing.datasets) expect(renderEntry(d)).not.toContain("null");
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

  it("moves the rewriteToken with generation or the rewrite counter, never with the change counter; the changeToken ignores the rewrite counter", () => {
    const base = entry({ key: "k", kind: "submission", displayName: "K" });
    const token = rewriteToken(base);
    expect(rewriteToken({ ...base, changeCounter: "7" })).toBe(token);
    expect(rewriteToken({ ...base, displayName: "Renamed" })).toBe(token);
    expect(rewriteToken({ ...base, generation: 2 })).not.toBe(token);
    expect(rewriteToken({ ...base, rewriteCounter: "1" })).not.toBe(token);
    expect(rewriteToken({ ...base, key: "other" })).not.toBe(token);
    expect(changeToken({ ...base, rewriteCounter: "1" })).toBe(changeToken(base));
    expect(rewriteToken({ ...base, datasetRewriteCounter: "1" })).not.toBe(token);
    expect(rewriteToken({ ...base, datasetRewriteCounter: "2" })).not.toBe(rewriteToken({ ...base, datasetRewriteCounter: "1" }));
    expect(changeToken({ ...base, datasetRewriteCounter: "1" })).toBe(changeToken(base));
    // A dataset counter of 0 leaves the material as it was before migration 105: no token moves on deploy.
    expect(token).toBe(createHash("sha256").update(JSON.stringify(["rewrite", "k", 1, "0"])).digest("base64url").slice(0, 22));
    const listed = buildListing([base]).datasets[0];
    expect(listed.rewriteToken).toBe(token);
    expect(listed.rewriteToken).not.toBe(listed.changeToken);
  });

  it("marks a token held while counted rows are not before the horizon, and moves it with the horizon", () => {
    const base = { ...entry({ key: "k", kind: "resource" }), sourceRef: "lots", settlesAtMicros: "2000" };
    const horizon = (micros: number): ListingHorizon => ({ nowMicros: 5000n, horizonMicros: BigInt(micros), pendingByForm: new Map() });
    expect(tokenVisibility(base, horizon(2001))).toBe("settled");
    expect(tokenVisibility(base, horizon(2000))).toEqual({ heldBeforeMicros: 2000n });
    expect(tokenVisibility({ ...base, settlesAtMicros: undefined }, horizon(1))).toBe("settled");
    const settled = changeToken(base, "settled");
    expect(settled).toBe(changeToken(base)); // a settled token is the token as it always was
    const heldAt1500 = changeToken(base, { heldBeforeMicros: 1500n });
    expect(heldAt1500).not.toBe(settled);
    expect(changeToken(base, { heldBeforeMicros: 1900n })).not.toBe(heldAt1500);
    expect(buildListing([base], horizon(1500)).datasets[0].changeToken).toBe(heldAt1500);
  });

  it("uses the version ETag only when every token is settled, the content hash otherwise", () => {
    const base = { ...entry({ key: "k", kind: "resource" }), sourceRef: "lots", settlesAtMicros: "2000" };
    const horizon = (micros: number): ListingHorizon => ({ nowMicros: 5000n, horizonMicros: BigInt(micros), pendingByForm: new Map() });
    const org = "0b4f6c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b";
    const v = versionEtag(org, "7");
    expect(v).toMatch(/^"[A-Za-z0-9_-]{32}"$/);
    expect(versionEtag(org, "8")).not.toBe(v);
    expect(versionEtag(org.toUpperCase(), "7")).toBe(v);
    const settled = buildListing([base], horizon(3000), v);
    expect(settled).toEqual(expect.objectContaining({ etag: v, allSettled: true }));
    const held = buildListing([base], horizon(1500), v);
    expect(held.allSettled).toBe(false);
    expect(held.etag).toBe(buildListing([base], horizon(1500)).etag);
    expect(held.etag).not.toBe(v);
    expect(buildListing([base], horizon(3000)).etag).not.toBe(v); // no version given: the content hash
  });

  it("lists each entry's grids in listing order, for thousands of entries", () => {
    const forms = Array.from({ length: 3000 }, (_, i) => entry({ key: `f${i}`, kind: "submission", displayName: `Form ${String(i).padStart(4, "0")}` }));
    const grids = forms.flatMap((f) => [
      entry({ key: `${f.key}__b`, kind: "grid", displayName: `${f.displayName} - B`, parentKey: f.key }),
      entry({ key: `${f.key}__a`, kind: "grid", displayName: `${f.displayName} - A`, parentKey: f.key }),
    ]);
    const nested = entry({ key: "f0__a__x", kind: "grid", displayName: "Form 0000 - A - X", parentKey: "f0__a" });
    const { datasets } = buildListing([...grids, nested, ...forms].reverse());
    const byKey = new Map(datasets.map((d) => [d.key, d]));
    for (const f of forms) expect(byKey.get(f.key)!.childDatasets).toEqual([`${f.key}__a`, `${f.key}__b`]);
    expect(byKey.get("f0__a")!.childDatasets).toEqual(["f0__a__x"]);
    expect(byKey.get("f0__b")!.childDatasets).toEqual([]);
    // Grids are never listed as children of anything but their parent.
    expect(datasets.reduce((n, d) => n + d.childDatasets.length, 0)).toBe(grids.length + 1);
  });

  it("holds a form dataset's token behind its form's oldest unapplied change", () => {
    const form = "0b4f6c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b";
    const grid = { ...entry({ key: "g", kind: "grid" }), sourceRef: `${form}/grid1`, settlesAtMicros: "2000" };
    const pending: ListingHorizon = { nowMicros: 5000n, horizonMicros: 5000n, pendingByForm: new Map([[form, 1000n]]) };
    expect(tokenVisibility(grid, pending)).toEqual({ heldBeforeMicros: 1000n });
    expect(tokenVisibility({ ...grid, sourceRef: "11111111-2222-4333-8444-555555555555" }, pending)).toBe("settled");
  });
});
