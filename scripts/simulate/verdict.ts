import { Client } from "pg";
import { RESOURCE_TABLES, type ResourceKind } from "@exportsvc/datasets";
import { LAG_PROBE_SQL } from "./lag-probe";

/**
 * The verdict: the consumer's copy compared with two independent truths — a fresh full export into
 * a second target, and the ids and `last_modified` values read straight from the source tables.
 *
 * Failing categories (the contract lets a consumer get each of them right without a blind full read):
 *   lost, duplicated, stale, extra;
 *   deletedInSource  rows of records deleted in the source (incl. a submission's deviations): the
 *                    deletion feed names them;
 *   gridEmptied      grid rows of a submission that has no grid rows any more: older than their
 *                    submission's row, which grid rows share id and last_modified with;
 *   rewritten        same `last_modified`, different values (related-record renames, option or
 *                    site time-zone changes, columns added by a form publish): rewriteToken moves.
 * Reported apart, named as such (docs/simulation.md says why):
 *   retiredDatasets  rows of dataset keys retired by a form rename.
 */

export interface DatasetVerdict {
  dataset: string;
  kind: string;
  copyRows: number;
  fullRows: number;
  sourceIds?: number;
  lost: number;
  stale: number;
  extra: number;
  deletedInSource: number;
  gridEmptied: number;
  rewritten: number;
  /** Full export vs source tables (server-side truth), when the dataset is read from a source table. */
  exportVsSource?: { missing: number; extra: number; lastModifiedDiffers: number };
  examples: string[];
  lagMs: number[];
}

export interface OrgVerdict {
  organizationId: string;
  datasets: DatasetVerdict[];
  /** Tables of dataset keys no longer listed; `recognized`: the consumer marked the key retired. */
  retiredDatasets: { dataset: string; rows: number; recognized: boolean }[];
  counters: Record<string, number>;
  fullCounters: Record<string, number>;
  lagPoints: { t: number; lagMs: number }[];
  /** Rows duplicated (counted by the consumer, not per dataset; see below). */
  duplicated: number;
}

interface Row {
  lm: string;
  data: Record<string, string>;
}

export type CopyLayout = "minimal" | "sync-client";

/** The reference client's state schema (packages/sync-client, targets/postgres.ts). */
const SYNC_CLIENT_STATE = "dataset_sync";

/** Keys of the datasets a target holds a sync state for. */
async function syncedDatasets(db: Client, layout: CopyLayout): Promise<string[]> {
  const sql = layout === "minimal" ? "SELECT dataset FROM sync_state" : `SELECT dataset_key AS dataset FROM ${SYNC_CLIENT_STATE}.datasets`;
  return (await db.query<{ dataset: string }>(sql)).rows.map((r) => r.dataset);
}

async function readRows(db: Client, layout: CopyLayout): Promise<Map<string, Map<string, Row>>> {
  const out = new Map<string, Map<string, Row>>();
  let sql = "SELECT dataset, id, row_index, last_modified, data FROM sync_rows";
  if (layout === "sync-client") {
    // One typed table per dataset; values compared as PostgreSQL's text forms (both targets alike).
    const tables = await db.query<{ dataset_key: string; table_name: string; has_row_index: boolean }>(
      `SELECT d.dataset_key, d.table_name,
              EXISTS (SELECT 1 FROM information_schema.columns c WHERE c.table_schema = current_schema() AND c.table_name = d.table_name AND c.column_name = 'row_index') AS has_row_index
         FROM ${SYNC_CLIENT_STATE}.datasets d WHERE to_regclass(quote_ident(d.table_name)) IS NOT NULL`,
    );
    if (tables.rows.length === 0) return out;
    const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;
    sql = tables.rows
      .map(
        (t) =>
          `SELECT ${lit(t.dataset_key)} AS dataset, id::text AS id, ${t.has_row_index ? "row_index::int" : "0"} AS row_index, last_modified::text AS last_modified,
                  (SELECT jsonb_object_agg(k, v) FROM jsonb_each_text(to_jsonb(x) - '_sync$generation') AS e(k, v)) AS data
             FROM ${`"${t.table_name.replace(/"/g, '""')}"`} x`,
      )
      .join(" UNION ALL ");
  }
  const res = await db.query<{ dataset: string; id: string; row_index: number; last_modified: string; data: Record<string, string> }>(sql);
  for (const r of res.rows) {
    let m = out.get(r.dataset);
    if (!m) out.set(r.dataset, (m = new Map()));
    m.set(`${r.id}/${r.row_index}`, { lm: r.last_modified, data: r.data });
  }
  return out;
}

async function counters(db: Client, layout: CopyLayout): Promise<Record<string, number>> {
  if (layout !== "minimal") return {}; // the reference client reports its own counters
  const res = await db.query<{ name: string; value: string }>("SELECT name, value FROM sync_counters");
  return Object.fromEntries(res.rows.map((r) => [r.name, Number(r.value)]));
}

/** Values equal under the loader rule "unknown columns are new, missing ones are empty". */
function sameValues(a: Record<string, string>, b: Record<string, string>): boolean {
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if ((a[k] ?? "") !== (b[k] ?? "")) return false;
  return true;
}

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function lagSummary(lags: number[]): { count: number; p50: number | null; p95: number | null; p99: number | null; max: number | null } {
  const s = lags.slice().sort((a, b) => a - b);
  return { count: s.length, p50: percentile(s, 50), p95: percentile(s, 95), p99: percentile(s, 99), max: s.length ? s[s.length - 1] : null };
}

export async function orgVerdict(opts: { sourceUrl: string; copyUrl: string; fullUrl: string; organizationId: string; since: Date; layout: CopyLayout }): Promise<OrgVerdict> {
  const connect = async (url: string) => {
    const c = new Client({ connectionString: url, options: "-c TimeZone=UTC" });
    await c.connect();
    return c;
  };
  const [source, copyDb, fullDb] = await Promise.all([connect(opts.sourceUrl), connect(opts.copyUrl), connect(opts.fullUrl)]);
  try {
    const org = opts.organizationId;
    const copy = await readRows(copyDb, opts.layout);
    const full = await readRows(fullDb, opts.layout);
    const listed = await syncedDatasets(fullDb, opts.layout);
    const registry = new Map(
      (await source.query<{ key: string; kind: string; source_ref: string }>("SELECT key, kind, source_ref FROM dataset_registry WHERE organization_id = $1", [org])).rows.map((r) => [r.key, r]),
    );
    const liveSubmissions = new Set((await source.query<{ id: string }>("SELECT id FROM submissions WHERE organization_id = $1", [org])).rows.map((r) => r.id));
    // Lag: recorded by the stand-in consumer (sync_lag), and for the reference client by the probe
    // the simulator installs in its copy database (lag-probe.ts).
    const lagRows = await copyDb.query<{ dataset: string; lag_ms: number; t: string }>(
      opts.layout === "minimal"
        ? `SELECT dataset, extract(epoch FROM synced_at - last_modified) * 1000 AS lag_ms, extract(epoch FROM synced_at) * 1000 AS t
             FROM sync_lag WHERE last_modified >= $1 ORDER BY synced_at`
        : LAG_PROBE_SQL,
      [opts.since],
    );

    const datasets: DatasetVerdict[] = [];
    for (const key of listed.sort()) {
      const reg = registry.get(key);
      const kind = reg?.kind ?? "unknown";
      const c = copy.get(key) ?? new Map<string, Row>();
      const f = full.get(key) ?? new Map<string, Row>();
      const v: DatasetVerdict = {
        dataset: key, kind, copyRows: c.size, fullRows: f.size, lost: 0, stale: 0, extra: 0,
        deletedInSource: 0, gridEmptied: 0, rewritten: 0, examples: [],
        lagMs: lagRows.rows.filter((r) => r.dataset === key).map((r) => Number(r.lag_ms)),
      };
      const example = (s: string) => v.examples.length < 5 && v.examples.push(s);

      // Source truth: ids and last_modified straight from the source table.
      let sourceIds: Map<string, string> | undefined;
      if (reg && reg.kind !== "grid") {
        const table = reg.kind === "resource" ? RESOURCE_TABLES[reg.source_ref as ResourceKind] : reg.kind === "deviations" ? "deviations" : "submissions";
        const where = reg.kind === "submission" ? " AND form_id = $2" : "";
        const params = reg.kind === "submission" ? [org, reg.source_ref] : [org];
        const res = await source.query<{ id: string; lm: string }>(`SELECT id, last_modified::text AS lm FROM ${table} WHERE organization_id = $1${where}`, params);
        sourceIds = new Map(res.rows.map((r) => [r.id, r.lm]));
        v.sourceIds = sourceIds.size;
        const fullIds = new Map([...f.entries()].map(([k, r]) => [k.split("/")[0], r.lm]));
        const evs = { missing: 0, extra: 0, lastModifiedDiffers: 0 };
        for (const [id, lm] of sourceIds) {
          if (!fullIds.has(id)) {
            evs.missing++;
            example(`source row ${id} (${lm}) missing from the full export`);
          } else if (fullIds.get(id) !== lm) {
            evs.lastModifiedDiffers++;
            example(`source row ${id}: last_modified ${lm}, full export ${fullIds.get(id)}`);
          }
          // The copy against the source directly.
          const inCopy = c.get(`${id}/0`);
          if (!inCopy) {
            if (fullIds.has(id)) continue; // counted below as lost (copy vs full export)
            v.lost++;
            example(`source row ${id} missing from the copy`);
          } else if (inCopy.lm !== lm && fullIds.get(id) === lm) {
            // counted below as stale
          } else if (inCopy.lm !== lm) {
            v.stale++;
            example(`copy ${id}: last_modified ${inCopy.lm}, source ${lm}`);
          }
        }
        for (const id of fullIds.keys()) {
          if (!sourceIds.has(id)) {
            evs.extra++;
            example(`full export row ${id} not in the source table`);
          }
        }
        v.exportVsSource = evs;
      }

      // The copy against the fresh full export.
      const fullSubmissionIds = new Set([...f.keys()].map((k) => k.split("/")[0]));
      for (const [k, fr] of f) {
        const cr = c.get(k);
        if (!cr) {
          v.lost++;
          example(`lost: ${k} (${fr.lm})`);
        } else if (cr.lm !== fr.lm) {
          v.stale++;
          example(`stale: ${k} copy ${cr.lm}, full export ${fr.lm}`);
        } else if (!sameValues(cr.data, fr.data)) {
          v.rewritten++;
          const differs = [...new Set([...Object.keys(cr.data), ...Object.keys(fr.data)])].filter((col) => (cr.data[col] ?? "") !== (fr.data[col] ?? ""));
          example(`rewritten: ${k} (${fr.lm}) differs in ${differs.slice(0, 4).map((col) => `${col}: copy ${JSON.stringify(cr.data[col] ?? "").slice(0, 40)}, full export ${JSON.stringify(fr.data[col] ?? "").slice(0, 40)}`).join("; ")}`);
        }
      }
      for (const [k] of c) {
        if (f.has(k)) continue;
        const id = k.split("/")[0];
        const deleted = kind === "grid" ? !liveSubmissions.has(id) : sourceIds ? !sourceIds.has(id) : false;
        if (deleted) {
          v.deletedInSource++;
          example(`deleted in source, still in the copy: ${k} (${c.get(k)!.lm})`);
        } else if (kind === "grid" && !fullSubmissionIds.has(id)) {
          v.gridEmptied++;
          example(`grid emptied, rows still in the copy: ${k} (${c.get(k)!.lm})`);
        } else {
          v.extra++;
          example(`extra: ${k} is in the copy, not in the full export`);
        }
      }
      datasets.push(v);
    }
    // A key that left the listing must be known as retired by the consumer (the reference client marks
    // it `retiredAt` and stops reading into its table); its rows are then history, reported apart.
    const retiredMarked =
      opts.layout === "sync-client"
        ? new Set((await copyDb.query<{ key: string }>(`SELECT dataset_key AS key FROM ${SYNC_CLIENT_STATE}.datasets WHERE state->>'retiredAt' IS NOT NULL`)).rows.map((r) => r.key))
        : undefined;
    const retiredDatasets = [...copy.keys()]
      .filter((k) => !listed.includes(k))
      .map((k) => ({ dataset: k, rows: copy.get(k)!.size, recognized: retiredMarked ? retiredMarked.has(k) : true }));
    const cc = await counters(copyDb, opts.layout);
    const fc = await counters(fullDb, opts.layout);
    // Duplicates are counted by the consumer, for the whole organization: the same (id, row_index)
    // twice in one page (copy or full export), or twice in the full export's one pass over a dataset
    // while nothing changes. (The copy itself cannot hold a duplicate: it upserts on the key.)
    const duplicated = (cc.duplicatesInPage ?? 0) + (fc.duplicatesInPage ?? 0) + (fc.seenAgainInOnePass ?? 0);
    return {
      organizationId: org, datasets, retiredDatasets, counters: cc, fullCounters: fc, duplicated,
      lagPoints: lagRows.rows.map((r) => ({ t: Number(r.t), lagMs: Number(r.lag_ms) })),
    };
  } finally {
    await Promise.all([source.end(), copyDb.end(), fullDb.end()]);
  }
}

export interface Totals {
  lost: number;
  duplicated: number;
  stale: number;
  extra: number;
  deletedInSource: number;
  gridEmptied: number;
  rewritten: number;
  exportVsSource: number;
  /** Keys gone from the listing that the consumer still treats as live. */
  unretiredKeys: number;
  apart: { retiredDatasetRows: number };
}

export function totals(orgs: OrgVerdict[]): Totals {
  const t: Totals = { lost: 0, duplicated: 0, stale: 0, extra: 0, deletedInSource: 0, gridEmptied: 0, rewritten: 0, exportVsSource: 0, unretiredKeys: 0, apart: { retiredDatasetRows: 0 } };
  for (const o of orgs) {
    t.duplicated += o.duplicated;
    for (const d of o.datasets) {
      t.lost += d.lost;
      t.stale += d.stale;
      t.extra += d.extra;
      if (d.exportVsSource) t.exportVsSource += d.exportVsSource.missing + d.exportVsSource.extra + d.exportVsSource.lastModifiedDiffers;
      t.deletedInSource += d.deletedInSource;
      t.gridEmptied += d.gridEmptied;
      t.rewritten += d.rewritten;
    }
    for (const r of o.retiredDatasets) {
      if (r.recognized) t.apart.retiredDatasetRows += r.rows;
      else t.unretiredKeys++;
    }
  }
  return t;
}

export const failed = (t: Totals) => t.lost + t.duplicated + t.stale + t.extra + t.deletedInSource + t.gridEmptied + t.rewritten + t.exportVsSource + t.unretiredKeys > 0;
