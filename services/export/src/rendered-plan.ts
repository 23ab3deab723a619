import { FIXED_DATASETS_BY_KEY, fixedDatasetSource, loadRenderedPlan, type PageDataset, type Queryable, type RenderedPlan } from "@exportsvc/datasets";
import type { PageRequest } from "./pages";

/**
 * A rendered dataset's plan read beside the page's registry entry, not after it: the key of a fixed
 * dataset names its kind and source, all the plan's statement needs. Returns the function that gives
 * the plan of the dataset the registry names: that early one when they agree, else one read then. The
 * plan is only the page's first guess (its statement checks it), so reading it early costs nothing in
 * exactness; an early read nobody asks for (an unknown key, a failed registry read) is dropped
 * without an unhandled rejection.
 */
export function renderedPlanStarter(db: Queryable, request: PageRequest): (dataset: PageDataset) => Promise<RenderedPlan | undefined> {
  // Every fixed dataset is a rendered kind (a resource dataset or deviations).
  const fixed = FIXED_DATASETS_BY_KEY.get(request.datasetKey);
  const source = fixed ? fixedDatasetSource(fixed) : undefined;
  const early = source ? loadRenderedPlan(db, request.organizationId, { key: request.datasetKey, ...source }) : undefined;
  early?.catch(() => undefined);
  return (dataset) => (early && dataset.kind === source?.kind && dataset.sourceRef === source.sourceRef ? early : loadRenderedPlan(db, request.organizationId, dataset));
}
