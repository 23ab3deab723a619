/**
 * renderedPlanStarter: a fixed dataset's rendered plan is read as the page starts, beside its registry
 * entry, and used only when the registry names the same kind and source; other keys read it then.
 */
import type { PageDataset, Queryable } from "@exportsvc/datasets";
import { renderedPlanStarter } from "../src/rendered-plan";

const ORG = "6f1f7a52-5b8e-4d8e-9a51-0d7c3c9f1e01";

/** A database that answers every plan read with no rendered table, recording the dataset each read named. */
function recordingDb(fail = false) {
  const reads: string[] = [];
  const db: Queryable = {
    query: (async (config: { values: unknown[] }) => {
      reads.push(String(config.values[1]));
      if (fail) throw new Error("database down");
      return { rows: [] };
    }) as unknown as Queryable["query"],
  };
  return { db, reads };
}

const dataset = (key: string, kind: PageDataset["kind"], sourceRef: string): PageDataset => ({ key, kind, sourceRef, columns: [] });

describe("renderedPlanStarter", () => {
  it("reads a fixed rendered dataset's plan before the registry is read, and serves that read when the registry agrees", async () => {
    const { db, reads } = recordingDb();
    const planOf = renderedPlanStarter(db, { organizationId: ORG, datasetKey: "resources_suppliers" });
    expect(reads).toEqual(["resources_suppliers"]);
    expect(await planOf(dataset("resources_suppliers", "resource", "suppliers"))).toBeUndefined();
    expect(reads).toEqual(["resources_suppliers"]);
    const deviations = renderedPlanStarter(db, { organizationId: ORG, datasetKey: "deviations" });
    await deviations(dataset("deviations", "deviations", "deviations"));
    expect(reads).toEqual(["resources_suppliers", "deviations"]);
  });

  it("reads nothing early for a key no fixed rendered dataset has; asked, it reads then", async () => {
    const { db, reads } = recordingDb();
    const planOf = renderedPlanStarter(db, { organizationId: ORG, datasetKey: "inspection" });
    expect(reads).toEqual([]);
    await planOf(dataset("inspection", "resource", "suppliers"));
    expect(reads).toEqual(["inspection"]);
  });

  it("reads again for the registry's dataset when it names another kind or source than the key's definition", async () => {
    const { db, reads } = recordingDb();
    const planOf = renderedPlanStarter(db, { organizationId: ORG, datasetKey: "resources_suppliers" });
    await planOf(dataset("resources_suppliers", "resource", "customers"));
    expect(reads).toEqual(["resources_suppliers", "resources_suppliers"]);
  });

  it("an early read that fails reaches the page only when it is used; an unused one is no unhandled rejection", async () => {
    const unhandled = jest.fn();
    process.on("unhandledRejection", unhandled);
    try {
      const { db } = recordingDb(true);
      renderedPlanStarter(db, { organizationId: ORG, datasetKey: "deviations" });
      await expect(renderedPlanStarter(db, { organizationId: ORG, datasetKey: "deviations" })(dataset("deviations", "deviations", "deviations"))).rejects.toThrow("database down");
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off("unhandledRejection", unhandled);
    }
  });
});
