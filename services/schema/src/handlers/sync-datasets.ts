import type { Pool } from "pg";
import { Errors, isUuid } from "@exportsvc/common";
import type { SyncDatasetsRequest } from "@exportsvc/proto";
import type { DatasetSyncer } from "../sync/syncer";
import { syncOrganization } from "../sync/organization-sync";

/** SyncDatasets: brings the organization's registry up to date now (read-your-writes for catalog/export). */
export async function syncDatasets(pool: Pool, syncers: readonly DatasetSyncer[], request: SyncDatasetsRequest): Promise<{ changed: number }> {
  if (!isUuid(request.organizationId)) {
    throw Errors.invalidParameter({ organization_id: ["must be a uuid"] });
  }
  return { changed: await syncOrganization(pool, request.organizationId, syncers) };
}
