import fc from "fast-check";
import { assignDatasetKeys, assignUniqueNames, composedName, directName, normalizeName } from "../src";

const IDENTIFIER = /^[a-z0-9_]{1,63}$/;
// Mixed alphabets (spaces, dashes, symbols, non-ASCII) and long strings exercise every rule.
const rawName = fc.oneof(
  fc.string({ maxLength: 120, unit: "grapheme" }),
  fc.string({ maxLength: 90, unit: fc.constantFrom("a", "B", " ", "-", "_", "1", "é", "#", "x") }),
);
const parts = fc.array(rawName, { minLength: 1, maxLength: 4 });
const affix = fc.option(fc.constantFrom("id", "name", "date", "verification", "Some Prefix"), { nil: undefined });

describe("naming properties", () => {
  it("normalizeName yields [a-z0-9_]+ without runs of underscores, and is idempotent", () => {
    fc.assert(
      fc.property(rawName, (raw) => {
        const n = normalizeName(raw);
        expect(n).toMatch(/^[a-z0-9_]+$/);
        expect(n).not.toMatch(/__/);
        expect(normalizeName(n)).toBe(n);
      }),
    );
  });

  it("directName and composedName are identifiers of at most 63 characters and deterministic", () => {
    fc.assert(
      fc.property(rawName, parts, affix, affix, (raw, ps, prefix, suffix) => {
        const d = directName(raw);
        const c = composedName({ parts: ps, prefix, suffix });
        expect(d).toMatch(IDENTIFIER);
        expect(c).toMatch(IDENTIFIER);
        expect(directName(raw)).toBe(d);
        expect(composedName({ parts: ps, prefix, suffix })).toBe(c);
      }),
    );
  });

  const candidateSets = fc
    .uniqueArray(fc.record({ sourceId: fc.uuid(), raw: fc.constantFrom("a", "A", "b", "row index", "x".repeat(70), "x".repeat(71), "a_2", "name") }), {
      selector: (c) => c.sourceId,
      maxLength: 25,
    })
    .map((cs) => cs.map((c) => ({ sourceId: c.sourceId, name: composedName([c.raw]) })));
  const reserved = fc.subarray(["id", "name", "row_index", "last_modified", "a"]);

  it("assignUniqueNames gives every candidate a unique, unreserved identifier", () => {
    fc.assert(
      fc.property(candidateSets, reserved, (cands, res) => {
        const names = assignUniqueNames(cands, { reserved: res });
        const values = [...names.values()];
        expect(names.size).toBe(cands.length);
        expect(new Set(values).size).toBe(values.length);
        for (const v of values) {
          expect(v).toMatch(IDENTIFIER);
          expect(res).not.toContain(v);
        }
        expect(assignUniqueNames(cands, { reserved: res })).toEqual(names);
      }),
    );
  });

  it("assignUniqueNames is stable when re-run with previous assignments and extra candidates", () => {
    fc.assert(
      fc.property(candidateSets, candidateSets, reserved, fc.nat(), (first, extra, res, at) => {
        const firstIds = new Set(first.map((c) => c.sourceId));
        const added = extra.filter((c) => !firstIds.has(c.sourceId));
        const before = assignUniqueNames(first, { reserved: res });
        const position = first.length === 0 ? 0 : at % (first.length + 1);
        const rerun = [...first.slice(0, position), ...added, ...first.slice(position)];
        const after = assignUniqueNames(rerun, { reserved: res, previous: before });
        for (const c of first) expect(after.get(c.sourceId)).toBe(before.get(c.sourceId));
        expect(new Set(after.values()).size).toBe(rerun.length);
      }),
    );
  });

  it("assignDatasetKeys gives unique identifiers outside the taken set, stable with previous keys", () => {
    const keyCandidates = fc
      .uniqueArray(fc.record({ sourceId: fc.uuid(), raw: fc.constantFrom("audit", "Audit", "deviations", "n".repeat(80)) }), {
        selector: (c) => c.sourceId,
        maxLength: 12,
      })
      .map((cs) => cs.map((c) => ({ sourceId: c.sourceId, name: directName(c.raw), hashInput: c.sourceId })));
    fc.assert(
      fc.property(keyCandidates, keyCandidates, (first, extra) => {
        const taken = ["deviations", "resources_suppliers"];
        const keys = assignDatasetKeys(first, { taken });
        const values = [...keys.values()];
        expect(new Set(values).size).toBe(values.length);
        for (const v of values) {
          expect(v).toMatch(IDENTIFIER);
          expect(taken).not.toContain(v);
        }
        const firstIds = new Set(first.map((c) => c.sourceId));
        const all = [...extra.filter((c) => !firstIds.has(c.sourceId)), ...first];
        const again = assignDatasetKeys(all, { taken: [...taken, ...values], previous: keys });
        for (const c of first) expect(again.get(c.sourceId)).toBe(keys.get(c.sourceId));
        expect(new Set(again.values()).size).toBe(all.length);
      }),
    );
  });
});
