/** `status`: what the copy holds per dataset, read from the state stored in the target. */
import type { Target } from "./targets/target";

export interface DatasetStatus {
  dataset: string;
  table: string;
  rows: number | null;
  phase: string;
  inProgress: boolean;
  cursorAgeSeconds: number | null;
  lastSyncedAt: string | null;
  lastFullReadAt: string | null;
  changeToken: string | null;
  lastError: string | null;
  lastErrorCode: string | null;
  retiredAt: string | null;
}

export async function status(target: Target, now = new Date()): Promise<{ listingEtag: string | null; datasets: DatasetStatus[] }> {
  const state = await target.loadState();
  const datasets: DatasetStatus[] = [];
  for (const d of state.datasets.values()) {
    datasets.push({
      dataset: d.key,
      table: d.table,
      rows: await target.countRows(d.table),
      phase: d.phase,
      inProgress: d.inProgress,
      cursorAgeSeconds: d.cursorAt ? Math.round((now.getTime() - Date.parse(d.cursorAt)) / 1000) : null,
      lastSyncedAt: d.lastSyncedAt,
      lastFullReadAt: d.lastFullReadAt,
      changeToken: d.changeToken,
      lastError: d.lastError?.message ?? null,
      lastErrorCode: d.lastError?.errorCode ?? null,
      retiredAt: d.retiredAt,
    });
  }
  return { listingEtag: state.listingEtag, datasets };
}
