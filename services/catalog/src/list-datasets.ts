import type { Pool } from "pg";
import { Errors } from "@exportsvc/common";
import { ensureRegistryCurrent, loadRegistry } from "@exportsvc/datasets";
import { buildListing, type Listing } from "./listing";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ListDatasetsDeps {
  pool: Pool;
  /** Brings the organization's registry up to date (the schema service's SyncDatasets). */
  syncRegistry: (organizationId: string) => Promise<void>;
}

/** ListDatasets: the organization's live datasets, synced first when a change is pending (read-your-writes). */
export async function listDatasets(deps: ListDatasetsDeps, organizationId: string): Promise<Listing> {
  if (!UUID.test(organizationId)) throw Errors.invalidParameter({ organization_id: ["must be a uuid"] });
  await ensureRegistryCurrent(deps.pool, organizationId, deps.syncRegistry);
  return buildListing(await loadRegistry(deps.pool, organizationId));
}
