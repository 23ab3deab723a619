import type { Pool } from "pg";
import { Errors, preparedStatement } from "@exportsvc/common";
import { buildDeletionsQuery, DELETIONS_HEADER, formIdOfDataset, tombstoneScope, type CursorPosition, type PageDataset } from "@exportsvc/datasets";
import { create } from "@bufbuild/protobuf";
import { ExportDeletionsResponseSchema, type ExportDeletionsRequest } from "@exportsvc/proto";
import type { ChunkSink } from "../copy-stream";
import { callTraceId, grpcSink } from "@exportsvc/rpc";
import { resolveCursor } from "../cursor-check";
import {
  csvField,
  loadExportableDataset,
  notExportable,
  onOrganizationShare,
  pageHorizonStarter,
  streamCsv,
  withDatabase,
  type DeletionsCall,
  type ExportDependencies,
} from "../pages";
import { checkDeletionsParameters } from "../parameters";

const HEADER = Buffer.from(`${DELETIONS_HEADER.map(csvField).join(",")}\n`, "utf8");

const PRUNED_PAST = preparedStatement(
  "deletions-pruned-past",
  `SELECT (pruned_through_at, pruned_through_id) > ('epoch'::timestamptz + $3::bigint * interval '1 microsecond', $4::uuid) AS expired
     FROM dataset_tombstone_watermarks WHERE organization_id = $1 AND scope = $2`,
);

/**
 * True when retention pruned a tombstone of this feed that lies after the cursor's position: the
 * client would miss it, so it must re-read the dataset in full. A cursor at or after the newest pruned
 * tombstone lost nothing, however old it is.
 */
async function prunedPast(pool: Pool, organizationId: string, scope: string, after: CursorPosition): Promise<boolean> {
  const { rows } = await pool.query<{ expired: boolean }>({ ...PRUNED_PAST, values: [organizationId, scope, after.lastModifiedMicros.toString(), after.id] });
  return rows[0]?.expired ?? false;
}

const PENDING_TOMBSTONES_HORIZON = preparedStatement(
  "deletions-pending-tombstones",
  `WITH pending AS (
       SELECT c.submission_id, c.created_at FROM form_dataset_changes c
        WHERE c.organization_id = $1 AND c.form_id = $3::uuid AND c.kind = 'submission')
     SELECT (extract(epoch FROM min(t.deleted_at)) * 1000000)::bigint::text AS horizon
       FROM dataset_tombstones t
      WHERE t.organization_id = $1 AND t.scope = $2
        AND t.deleted_at >= (SELECT min(created_at) FROM pending)
        AND t.id IN (SELECT submission_id FROM pending)`,
);

/**
 * A form feed's tombstones wait until the materialized table no longer holds their row: the
 * submission's change is consumed by the schema service (normally within a second). Served earlier, a
 * client could apply the tombstone and then receive the stale row from the CSV endpoint, which the
 * horizon of the rows (visibility.ts) may still hold back, and keep it for ever. The feed's horizon is
 * therefore also the oldest tombstone of this form whose submission still has a pending change
 * (µs since the Unix epoch; undefined when there is none, and for resource and deviation feeds, whose
 * rows are read live).
 */
async function pendingTombstonesHorizon(pool: Pool, organizationId: string, scope: string): Promise<bigint | undefined> {
  if (!scope.startsWith("form:")) return undefined;
  // A delete writes its change row (trigger submissions_form_ds_del) before its tombstone
  // (submissions_tombstones_del: triggers fire in name order), so a pending change's tombstone is no
  // older than the change: only the feed's newest stretch is scanned, on its (organization, scope,
  // deleted_at) key, with no index on tombstone ids for deletes to maintain.
  const { rows } = await pool.query<{ horizon: string | null }>({ ...PENDING_TOMBSTONES_HORIZON, values: [organizationId, scope, scope.slice("form:".length)] });
  return rows[0].horizon === null ? undefined : BigInt(rows[0].horizon);
}

/**
 * ExportService.ExportDeletions: one page of a dataset's deletion feed as CSV bytes (`id`,
 * `deleted_at`, `_cursor`), oldest first. Same dataset lookup, limit, cursor verification, visibility
 * horizon and streaming as the CSV page (export-csv.ts); only the query and the header differ.
 */
export function exportDeletionsHandler(deps: ExportDependencies) {
  return async (request: ExportDeletionsRequest, call: DeletionsCall): Promise<void> => {
    const sink = grpcSink(call, (data) => create(ExportDeletionsResponseSchema, { data }));
    await onOrganizationShare(deps, request.organizationId, sink, () => deletionsPage(deps, request, sink, callTraceId(call.metadata)));
  };
}

async function deletionsPage(deps: ExportDependencies, request: ExportDeletionsRequest, sink: ChunkSink, traceId: string | undefined): Promise<void> {
  const started = process.hrtime.bigint();
  const horizonOf = pageHorizonStarter(deps, request, { readReplica: deps.readReplica, logger: deps.logger });
  const dataset: PageDataset = await loadExportableDataset(deps, request, traceId);
  const params = checkDeletionsParameters(request);
  let after: CursorPosition | undefined;
  if (params.cursor !== undefined) {
    const position = await withDatabase(() => resolveCursor(deps.pool, deps.codec, request.organizationId, dataset, params.cursor!, "deletions"));
    if (await withDatabase(() => prunedPast(deps.pool, request.organizationId, tombstoneScope(dataset), position))) {
      throw Errors.deletionsCursorExpired(dataset.key);
    }
    after = position;
  }
  // The rows' horizon (open transactions; pending changes of a form) holds the feed back too, so a
  // tombstone never overtakes a write still in flight, then the form feed's own rule above.
  const { visibleBeforeMicros: rowsHorizon, source } = await withDatabase(() => horizonOf(formIdOfDataset(dataset)));
  const pending = await withDatabase(() => pendingTombstonesHorizon(deps.pool, request.organizationId, tombstoneScope(dataset)));
  const visibleBeforeMicros = pending !== undefined && pending < rowsHorizon ? pending : rowsHorizon;

  let select: string;
  try {
    select = buildDeletionsQuery(dataset, { organizationId: request.organizationId, limit: params.limit, after, visibleBeforeMicros }, deps.codec);
  } catch (err) {
    throw notExportable(deps.logger, dataset.key, err, traceId);
  }
  const outcome = await streamCsv(deps, { source, select, header: HEADER, sink, dataset, organizationId: request.organizationId, traceId, what: "deletions" });
  deps.logger.info(
    {
      organizationId: request.organizationId,
      dataset: dataset.key,
      feed: "deletions",
      rows: outcome.rows,
      bytes: outcome.bytes,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    },
    "deletions page",
  );
}
