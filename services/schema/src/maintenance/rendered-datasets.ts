import type { Pool, PoolClient } from "pg";
import { escapeIdentifier } from "pg";
import type { Logger } from "@exportsvc/common";
import { inTransaction } from "@exportsvc/db";
import {
  isRenderedKind,
  loadRegistryEntry,
  loadRenderedState,
  pageHorizon,
  RENDER_VERSION,
  renderInputs,
  renderInputsSql,
  renderRowsSelect,
  FIXED_DATASETS,
  fixedDatasetSource,
  type FixedDatasetDefinition,
  rewriteKindsOf,
  rowsBinding,
  tableIdentifier,
  textLiteral,
  timestamptzLiteral,
  uuidLiteral,
  sourceOf,
  type CursorCodec,
  type CursorKey,
  type RegistryEntry,
  type RenderedState,
} from "@exportsvc/datasets";
import { advisoryLockKeys, ensureOrganizationSchema, organizationSchemaName } from "@exportsvc/form-datasets";

/*
 * Keeps the rendered tables of resource datasets and deviations current (migration 130, docs/export.md
 * "Rendered datasets"). The tables only make pages faster: a page whose table is not current reads
 * live, so nothing here is on the path of correctness beyond recording, with each table, exactly what
 * it was rendered from.
 */

export interface RenderOptions {
  /** Signs the stored `_cursor` (the export's CURSOR_KEYS); none: cursors are computed by every page. */
  codec?: CursorCodec;
  /** Datasets with fewer rows are not rendered (read live; a page of them is cheap anyway). */
  minRows: number;
}

/** What one render of a dataset did ("error": it failed, and is retried on a later pass). */
export const RENDER_OUTCOMES = ["built", "updated", "current", "small", "removed", "busy", "error"] as const;
export type RenderOutcome = (typeof RENDER_OUTCOMES)[number];

export interface RenderResult {
  outcome: RenderOutcome;
  /** Rows written (built) or rewritten and deleted (updated). */
  rows: number;
  ms: number;
}

/**
 * Brings one dataset's rendered table up to date with what it is rendered from, in one repeatable-read
 * transaction whose snapshot is what the recorded counters describe:
 * - built: no table yet, its columns or the rendering changed, or a record its rows show changed
 *   (the rewrite counters and log): every row rendered into a new table, the old one retired;
 * - updated: only the dataset's own rows changed: rows whose (id, last_modified) the table does not
 *   hold rendered again, rows gone from the source deleted;
 * - small: fewer than minRows rows: no table (pages read live);
 * - removed: the dataset is gone or not exportable: its table retired.
 * Another replica rendering the same dataset makes this one return "busy".
 */
export async function renderDataset(pool: Pool, organizationId: string, datasetKey: string, opts: RenderOptions): Promise<RenderResult> {
  const started = Date.now();
  const client = await pool.connect();
  const [lockA, lockB] = renderLockKeys(organizationId, datasetKey);
  try {
    const locked = (await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1, $2) AS ok", [lockA, lockB])).rows[0].ok;
    if (!locked) return { outcome: "busy", rows: 0, ms: 0 };
    try {
      // Taken before the snapshot: a rewrite entry the render does not see is stamped at or after it.
      const horizon = (await pageHorizon(client, organizationId, null)).visibleBeforeMicros;
      const result = await inTransaction(client, (tx) => renderInSnapshot(tx, organizationId, datasetKey, horizon, opts, started), { isolation: "repeatable read" });
      return result;
    } finally {
      await client.query("SELECT pg_advisory_unlock($1, $2)", [lockA, lockB]);
    }
  } finally {
    client.release();
  }
}

async function renderInSnapshot(tx: PoolClient, organizationId: string, datasetKey: string, horizonMicros: bigint, opts: RenderOptions, started: number): Promise<RenderResult> {
  await tx.query("SET LOCAL jit = off");
  const entry = await loadRegistryEntry(tx, organizationId, datasetKey);
  const state = await loadRenderedState(tx, organizationId, datasetKey, { forUpdate: true });
  const done = (outcome: RenderOutcome, rows: number) => ({ outcome, rows, ms: Date.now() - started });
  if (!entry || entry.state !== "ready" || !isRenderedKind(entry) || !(await exportEnabled(tx, organizationId))) {
    if (state) await removeState(tx, state);
    return done("removed", 0);
  }
  const rewritesFrom = timestamptzLiteral(horizonMicros);
  const now = await readInputs(tx, organizationId, entry, rewritesFrom);
  const signing = opts.codec?.keyring.signing;
  const signature = opts.codec && signing ? opts.codec.storedSignature(rowsBinding(organizationId, entry), signing) : null;

  if (state?.tableName && state.renderVersion === RENDER_VERSION && columnsEqual(state, entry) && state.cursorSignature === signature && (await rewritesUnchanged(tx, organizationId, entry, state))) {
    if (state.sourceVersion === now.sourceVersion) return done("current", 0);
    const rows = await updateRows(tx, organizationId, entry, state.tableName, opts.codec, signing);
    await saveState(tx, organizationId, entry, { tableName: state.tableName, signature, rewritesFrom, inputs: now, ms: Date.now() - started });
    return done("updated", rows);
  }

  const count = await countRows(tx, organizationId, entry, opts.minRows);
  if (count < opts.minRows) {
    if (state?.tableName) await retireTable(tx, organizationId, state.tableName);
    await saveState(tx, organizationId, entry, { tableName: null, signature, rewritesFrom, inputs: now, ms: Date.now() - started });
    return done("small", 0);
  }
  const tableName = await buildTable(tx, organizationId, entry, opts.codec, signing);
  if (state?.tableName) await retireTable(tx, organizationId, state.tableName);
  await saveState(tx, organizationId, entry, { tableName, signature, rewritesFrom, inputs: now, ms: Date.now() - started });
  const built = await tx.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${tableIdentifier(tableName)} WHERE organization_id = $1`, [organizationId]);
  return done("built", Number(built.rows[0].n));
}

/** Advisory lock keys of one dataset's render (session level, so a render never waits on another). */
export function renderLockKeys(organizationId: string, datasetKey: string): [number, number] {
  return advisoryLockKeys(`rendered-datasets/${organizationId.toLowerCase()}/${datasetKey}`);
}

interface RenderInputs {
  sourceVersion: string;
  organizationRewrites: string;
  datasetRewrites: string;
  rewriteEntries: string;
}

async function readInputs(tx: PoolClient, organizationId: string, entry: RegistryEntry, rewritesFrom: string): Promise<RenderInputs> {
  const sql = renderInputsSql(organizationId, entry, rewritesFrom);
  const { rows } = await tx.query<RenderInputs>(
    `SELECT ${sql.sourceVersion}::text AS "sourceVersion", ${sql.organizationRewrites}::text AS "organizationRewrites",
            ${sql.datasetRewrites}::text AS "datasetRewrites", ${sql.rewriteEntries}::text AS "rewriteEntries"`,
  );
  return rows[0];
}

/** Nothing the rows show of other records changed since the table's render (the page's patchable test, packages/datasets loadRenderedPlan). */
async function rewritesUnchanged(tx: PoolClient, organizationId: string, entry: RegistryEntry, state: RenderedState): Promise<boolean> {
  const from = timestamptzLiteral(BigInt(state.rewritesFromMicros));
  const sql = renderInputsSql(organizationId, entry, from);
  const { rows } = await tx.query<{ ok: boolean }>(
    `SELECT ${sql.organizationRewrites} = ${state.organizationRewrites} AND ${sql.datasetRewrites} = ${state.datasetRewrites}
        AND ${sql.rewriteEntries} = ${state.rewriteEntries} AND NOT ${sql.prunedSince} AS ok`,
  );
  return rows[0].ok;
}

const columnsEqual = (state: RenderedState, entry: RegistryEntry) => JSON.stringify(state.columns) === JSON.stringify(entry.columns);

async function exportEnabled(tx: PoolClient, organizationId: string): Promise<boolean> {
  const { rows } = await tx.query<{ ok: boolean }>("SELECT EXISTS (SELECT 1 FROM export_organizations WHERE organization_id = $1 AND export_enabled) AS ok", [organizationId]);
  return rows[0].ok;
}

/** The dataset's source table, the page query's own. */
const sourceTable = (entry: RegistryEntry, organizationId: string) => sourceOf(entry, organizationId, "join").table;

/** The organization's rows of the dataset, counted up to `upTo` (no more is read). */
async function countRows(tx: PoolClient, organizationId: string, entry: RegistryEntry, upTo: number): Promise<number> {
  if (upTo <= 0) return 0;
  const { rows } = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${escapeIdentifier(sourceTable(entry, organizationId))} WHERE organization_id = $1 LIMIT ${Math.floor(upTo)}) x`,
    [organizationId],
  );
  return rows[0].n;
}

/** A new table of every row rendered, in the organization's schema; its qualified name. */
async function buildTable(tx: PoolClient, organizationId: string, entry: RegistryEntry, codec: CursorCodec | undefined, signing: CursorKey | undefined): Promise<string> {
  await ensureOrganizationSchema(tx, organizationId);
  const schema = organizationSchemaName(organizationId);
  const name = `rd_${entry.key.replace(/[^a-z0-9_]/g, "_").slice(0, 40)}_${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;
  const qualified = `${schema}.${name}`;
  const table = tableIdentifier(qualified);
  await tx.query(`CREATE TABLE ${table} AS ${renderRowsSelect(entry, organizationId, codec, signing)}`);
  await tx.query(`CREATE UNIQUE INDEX ON ${table} (organization_id, id)`);
  await tx.query(`CREATE INDEX ON ${table} (organization_id, last_modified, id)`);
  await tx.query(`ANALYZE ${table}`);
  return qualified;
}

/** Rows whose (id, last_modified) the table lacks rendered again, rows gone from the source deleted; the count of both. */
async function updateRows(tx: PoolClient, organizationId: string, entry: RegistryEntry, tableName: string, codec: CursorCodec | undefined, signing: CursorKey | undefined): Promise<number> {
  const table = tableIdentifier(tableName);
  const org = uuidLiteral(organizationId);
  const stale = `NOT EXISTS (SELECT 1 FROM ${table} c WHERE c.organization_id = ${org} AND c.id = r.id AND c.last_modified = r.last_modified)`;
  const set = ["last_modified", "line", "signed_cursor"].map((c) => `${c} = excluded.${c}`).join(", ");
  const written = await tx.query(`INSERT INTO ${table} ${renderRowsSelect(entry, organizationId, codec, signing, stale)} ON CONFLICT (organization_id, id) DO UPDATE SET ${set}`);
  const deleted = await tx.query(
    `DELETE FROM ${table} c WHERE c.organization_id = ${org}
       AND NOT EXISTS (SELECT 1 FROM ${escapeIdentifier(sourceTable(entry, organizationId))} r WHERE r.organization_id = ${org} AND r.id = c.id)`,
  );
  return (written.rowCount ?? 0) + (deleted.rowCount ?? 0);
}

async function saveState(
  tx: PoolClient,
  organizationId: string,
  entry: RegistryEntry,
  s: { tableName: string | null; signature: string | null; rewritesFrom: string; inputs: RenderInputs; ms: number },
): Promise<void> {
  await tx.query(
    `INSERT INTO rendered_datasets (organization_id, dataset, table_name, columns, render_version, source_version, organization_rewrites,
        dataset_rewrites, rewrites_from, rewrite_entries, cursor_signature, rendered_at, render_ms)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, ${s.rewritesFrom}, $9, $10, clock_timestamp(), $11)
     ON CONFLICT (organization_id, dataset) DO UPDATE SET table_name = excluded.table_name, columns = excluded.columns,
        render_version = excluded.render_version, source_version = excluded.source_version, organization_rewrites = excluded.organization_rewrites,
        dataset_rewrites = excluded.dataset_rewrites, rewrites_from = excluded.rewrites_from, rewrite_entries = excluded.rewrite_entries,
        cursor_signature = excluded.cursor_signature, rendered_at = excluded.rendered_at, render_ms = excluded.render_ms`,
    [
      organizationId,
      entry.key,
      s.tableName,
      JSON.stringify(entry.columns),
      RENDER_VERSION,
      s.inputs.sourceVersion,
      s.inputs.organizationRewrites,
      s.inputs.datasetRewrites,
      s.inputs.rewriteEntries,
      s.signature,
      Math.min(s.ms, 2_147_483_647),
    ],
  );
}

async function removeState(tx: PoolClient, state: RenderedState): Promise<void> {
  if (state.tableName) await retireTable(tx, state.organizationId, state.tableName);
  await tx.query("DELETE FROM rendered_datasets WHERE organization_id = $1 AND dataset = $2", [state.organizationId, state.dataset]);
}

async function retireTable(tx: PoolClient, organizationId: string, tableName: string): Promise<void> {
  await tx.query("INSERT INTO rendered_dataset_retired_tables (organization_id, table_name) VALUES ($1, $2) ON CONFLICT DO NOTHING", [organizationId, tableName]);
}

/** Drops tables retired more than `graceMs` ago (a page planned against one a moment before still finds it); how many. */
export async function dropRetiredRenderedTables(pool: Pool, graceMs: number): Promise<number> {
  const { rows } = await pool.query<{ organization_id: string; table_name: string }>(
    "SELECT organization_id, table_name FROM rendered_dataset_retired_tables WHERE retired_at < clock_timestamp() - make_interval(secs => $1::float8 / 1000)",
    [graceMs],
  );
  for (const r of rows) {
    await inTransaction(pool, async (tx) => {
      await tx.query(`DROP TABLE IF EXISTS ${tableIdentifier(r.table_name)}`);
      await tx.query("DELETE FROM rendered_dataset_retired_tables WHERE organization_id = $1 AND table_name = $2", [r.organization_id, r.table_name]);
    });
  }
  return rows.length;
}

/**
 * Datasets whose rendered table may be behind (or that have none, or whose dataset is gone), the
 * longest unrendered first, at most `limit`. A dataset rendered a moment ago waits `dutyFactor`
 * times its last render's duration before the next, so one under constant writes is re-rendered at
 * a bounded duty (and read live in between); one found too small is counted again after
 * `smallRecheckMs` (default SMALL_RECHECK_MS) at the earliest, whatever its writes.
 */
export async function renderCandidates(pool: Pool, opts: { limit: number; dutyFactor: number; organizationId?: string; smallRecheckMs?: number }): Promise<Array<{ organizationId: string; dataset: string }>> {
  const kinds = JSON.stringify(Object.fromEntries(FIXED_DATASETS.map((d) => [d.key, rewriteKindsOf(fixedDatasetSource(d))])));
  const org = opts.organizationId ? `AND r.organization_id = ${uuidLiteral(opts.organizationId)}` : "";
  const i = renderInputs({
    organization: "r.organization_id",
    dataset: "r.key",
    kinds: `ARRAY(SELECT jsonb_array_elements_text(${textLiteral(kinds)}::jsonb -> r.key))`,
    rewritesFrom: "s.rewrites_from",
  });
  const { rows } = await pool.query<{ organizationId: string; dataset: string }>(
    `SELECT organization_id::text AS "organizationId", dataset FROM (
       SELECT r.organization_id, r.key AS dataset, s.rendered_at FROM dataset_registry r
         JOIN export_organizations e ON e.organization_id = r.organization_id AND e.export_enabled
         LEFT JOIN rendered_datasets s ON s.organization_id = r.organization_id AND s.dataset = r.key
        WHERE r.kind IN ('resource', 'deviations') AND r.state = 'ready' ${org}
          AND (s.organization_id IS NULL
               OR (s.rendered_at <= clock_timestamp() - make_interval(secs => s.render_ms * $1::float8 / 1000)
                   AND (s.table_name IS NOT NULL OR s.rendered_at <= clock_timestamp() - make_interval(secs => $3::float8 / 1000))
                   AND (s.render_version <> ${RENDER_VERSION} OR s.columns <> r.columns OR s.source_version <> ${i.sourceVersion}
                        OR s.organization_rewrites <> ${i.organizationRewrites} OR s.dataset_rewrites <> ${i.datasetRewrites}
                        OR s.rewrite_entries <> ${i.rewriteEntries} OR ${i.prunedSince})))
       UNION ALL
       SELECT s.organization_id, s.dataset, s.rendered_at FROM rendered_datasets s
        WHERE NOT EXISTS (SELECT 1 FROM dataset_registry r JOIN export_organizations e ON e.organization_id = r.organization_id AND e.export_enabled
                           WHERE r.organization_id = s.organization_id AND r.key = s.dataset AND r.state = 'ready') ${org.replace("r.organization_id", "s.organization_id")}
     ) c ORDER BY rendered_at NULLS FIRST LIMIT $2`,
    [opts.dutyFactor, opts.limit, opts.smallRecheckMs ?? SMALL_RECHECK_MS],
  );
  return rows;
}

/** How long a dataset found too small to render waits before it is counted again (its pages read live meanwhile). */
export const SMALL_RECHECK_MS = 10 * 60_000;

/** The longest wait before a failed render is tried again. */
const RETRY_MAX_MS = 5 * 60_000;

export interface RenderedDatasetsLoop {
  stop(): Promise<void>;
}

/**
 * Every `intervalMs`: renders the candidates (renderCandidates) one after another, then drops
 * retired tables past their grace. A failed render is logged and retried on a later pass.
 */
export function startRenderedDatasets(
  pool: Pool,
  opts: RenderOptions & { intervalMs: number; dutyFactor: number; dropGraceMs: number; log: Logger; organizationId?: string; onRender?: (result: RenderResult) => void },
): RenderedDatasetsLoop {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  // A dataset whose render failed waits before the next attempt, doubling up to RETRY_MAX_MS.
  const failures = new Map<string, { attempts: number; until: number }>();
  const pass = async () => {
    const candidates = await renderCandidates(pool, { limit: 50, dutyFactor: opts.dutyFactor, organizationId: opts.organizationId });
    for (const c of candidates) {
      if (stopped) return;
      const id = `${c.organizationId}/${c.dataset}`;
      const failed = failures.get(id);
      if (failed && failed.until > Date.now()) continue;
      const started = Date.now();
      try {
        const result = await renderDataset(pool, c.organizationId, c.dataset, opts);
        failures.delete(id);
        opts.onRender?.(result);
        if (result.outcome === "built") opts.log.info({ organizationId: c.organizationId, dataset: c.dataset, rows: result.rows, ms: result.ms }, "rendered dataset built");
        else if (result.outcome === "updated") opts.log.debug({ organizationId: c.organizationId, dataset: c.dataset, rows: result.rows, ms: result.ms }, "rendered dataset updated");
      } catch (err) {
        const attempts = (failed?.attempts ?? 0) + 1;
        failures.set(id, { attempts, until: Date.now() + Math.min(RETRY_MAX_MS, 1000 * 2 ** attempts) });
        opts.onRender?.({ outcome: "error", rows: 0, ms: Date.now() - started });
        opts.log.warn({ err, organizationId: c.organizationId, dataset: c.dataset }, "rendering a dataset failed; its pages read live until a later pass succeeds");
      }
    }
    await dropRetiredRenderedTables(pool, opts.dropGraceMs);
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = pass()
        .catch((err: unknown) => opts.log.warn({ err }, "rendered datasets pass failed; retrying"))
        .finally(schedule);
    }, opts.intervalMs);
    timer.unref();
  };
  schedule();
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
