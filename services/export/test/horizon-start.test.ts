/**
 * startHorizon: a page's horizon statement starts with its registry read when an earlier page of the
 * key named its form, and is only used when the registry names the same form.
 */
import type { Pool } from "pg";
import { FormIdHints, startHorizon, type PageVisibility } from "../src/visibility";

const ORG = "6f1f7a52-5b8e-4d8e-9a51-0d7c3c9f1e01";
const FORM = "0b9f2f4e-8a43-4b0e-9e8a-3f1f0c7d2a11";
const OTHER_FORM = "5c3e1d2b-7f6a-4e9b-8c1d-2a3b4c5d6e7f";

function recordingCompute() {
  const calls: Array<string | null> = [];
  const compute = (formId: string | null): Promise<PageVisibility> => {
    calls.push(formId);
    return Promise.resolve({ visibleBeforeMicros: BigInt(calls.length), source: {} as Pool });
  };
  return { calls, compute };
}

describe("startHorizon", () => {
  it("without a hint computes only once the registry has named the form, and remembers it", async () => {
    const hints = new FormIdHints();
    const { calls, compute } = recordingCompute();
    const horizonOf = startHorizon(compute, hints, ORG, "inspection");
    expect(calls).toEqual([]);
    await horizonOf(FORM);
    expect(calls).toEqual([FORM]);
    expect(hints.get(ORG, "inspection")).toBe(FORM);
  });

  it("with a hint starts before the registry read and serves that horizon when the registry agrees", async () => {
    const hints = new FormIdHints();
    hints.set(ORG, "resources_suppliers", null);
    const { calls, compute } = recordingCompute();
    const horizonOf = startHorizon(compute, hints, ORG, "resources_suppliers");
    expect(calls).toEqual([null]);
    expect((await horizonOf(null)).visibleBeforeMicros).toBe(1n);
    expect(calls).toEqual([null]);
  });

  it("a hint the registry contradicts is dropped and the horizon computed for the registry's form", async () => {
    const hints = new FormIdHints();
    hints.set(ORG, "inspection", OTHER_FORM);
    const { calls, compute } = recordingCompute();
    const horizonOf = startHorizon(compute, hints, ORG, "inspection");
    expect((await horizonOf(FORM)).visibleBeforeMicros).toBe(2n);
    expect(calls).toEqual([OTHER_FORM, FORM]);
    expect(hints.get(ORG, "inspection")).toBe(FORM);
  });

  it("an early horizon that fails reaches the page only when it is used; an unused one is no unhandled rejection", async () => {
    const unhandled = jest.fn();
    process.on("unhandledRejection", unhandled);
    try {
      const hints = new FormIdHints();
      hints.set(ORG, "inspection", FORM);
      const failing = () => Promise.reject(new Error("database down"));
      // The registry read failed (or the key is gone): nobody asks for the early horizon.
      startHorizon(failing, hints, ORG, "inspection");
      await expect(startHorizon(failing, hints, ORG, "inspection")(FORM)).rejects.toThrow("database down");
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off("unhandledRejection", unhandled);
    }
  });

  it("works without hints (never early)", async () => {
    const { calls, compute } = recordingCompute();
    const horizonOf = startHorizon(compute, undefined, ORG, "inspection");
    expect(calls).toEqual([]);
    await horizonOf(FORM);
    expect(calls).toEqual([FORM]);
  });
});

describe("FormIdHints", () => {
  it("keeps organizations apart and forgets the oldest beyond its size", () => {
    const hints = new FormIdHints(2);
    hints.set(ORG, "a", FORM);
    hints.set("b2c1d9e8-0000-4000-8000-000000000001", "a", OTHER_FORM);
    expect(hints.get(ORG, "a")).toBe(FORM);
    hints.set(ORG, "b", null);
    expect(hints.get(ORG, "a")).toBeUndefined();
    expect(hints.get(ORG, "b")).toBeNull();
    expect(hints.get("b2c1d9e8-0000-4000-8000-000000000001", "a")).toBe(OTHER_FORM);
  });
});
