import { randomBytes } from "node:crypto";
import type { Pool } from "pg";
import { parse } from "csv-parse/sync";
import type { AppError, Logger } from "@exportsvc/common";
import {
  FIXED_DATASETS_BY_KEY,
  attributeDataType,
  shapeFingerprint,
  type AttributeType,
  type ColumnSpec,
} from "@exportsvc/datasets";
import { ExportService, type ExportCsvRequest } from "@exportsvc/proto";
import { createClient, fromServiceError, type Client } from "@exportsvc/rpc";
import { testDatabaseUrl } from "../../../test/support/db";
import { start, type RunningExportService } from "../src/server";
import { exportConfigSchema } from "../src/config";

export const TEST_CURSOR_KEYS = `3:${randomBytes(24).toString("base64")},9:${randomBytes(24).toString("base64")}`;

export interface ExportHarness {
  service: RunningExportService;
  client: Client<typeof ExportService>;
  syncCalls: string[];
  stop(): Promise<void>;
}

/** The export service in this process over real gRPC, against the run's database. */
export async function startExport(
  env: Record<string, string> = {},
  cursorVersion?: number,
  syncRegistry?: (organizationId: string) => Promise<void>,
  log?: Logger,
): Promise<ExportHarness> {
  const config = exportConfigSchema.parse({
    DATABASE_URL: testDatabaseUrl(),
    GRPC_HOST: "127.0.0.1",
    GRPC_PORT: "0",
    SCHEMA_ADDRESS: "",
    CURSOR_KEYS: TEST_CURSOR_KEYS,
    LOG_LEVEL: "silent",
    DATABASE_POOL_MAX: "4",
    SHUTDOWN_GRACE_MS: "2000",
    ...env,
  });
  const syncCalls: string[] = [];
  const service = await start(config, {
    syncRegistry: async (organizationId) => {
      syncCalls.push(organizationId);
      await syncRegistry?.(organizationId);
    },
    cursorVersion,
    log,
  });
  const client = createClient(ExportService, `127.0.0.1:${service.port}`);
  return {
    service,
    client,
    syncCalls,
    stop: async () => {
      client.close();
      await service.stop();
    },
  };
}

export interface Page {
  header: string[];
  rows: Record<string, string>[];
  /** Raw cells, to tell an empty unquoted field (NULL) from `""` (empty string). */
  raw: string;
  text: string;
}

type Request = Partial<ExportCsvRequest> & { organizationId: string; datasetKey: string };

/** One ExportCsv call; resolves with the parsed page or rejects with the service's AppError. */
export function exportPage(client: Client<typeof ExportService>, request: Request): Promise<Page> {
  return collectPage(client.exportCsv(request));
}

/** One ExportDeletions call (a page of the deletion feed), like exportPage. */
export function deletionsPage(client: Client<typeof ExportService>, request: { organizationId: string; datasetKey: string; cursor?: string; limit?: number }): Promise<Page> {
  return collectPage(client.exportDeletions(request));
}

/** One ExportRewrites call (a page of the rewrite feed), like exportPage. */
export function rewritesPage(client: Client<typeof ExportService>, request: { organizationId: string; datasetKey: string; cursor?: string; limit?: number }): Promise<Page> {
  return collectPage(client.exportRewrites(request));
}

function collectPage(stream: NodeJS.ReadableStream): Promise<Page> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (msg: { data: Uint8Array }) => chunks.push(Buffer.from(msg.data)));
    stream.on("error", (err) => reject(fromServiceError(err)));
    stream.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const records = parse(text, { relax_column_count: false, max_record_size: 0 }) as string[][];
      const [header, ...body] = records;
      resolve({ header, rows: body.map((cells) => Object.fromEntries(header.map((h, i) => [h, cells[i]]))), raw: text, text });
    });
  });
}

/** The AppError of a call expected to fail. */
export async function callError(call: () => Promise<unknown>): Promise<AppError> {
  try {
    await call();
  } catch (err) {
    return err as AppError;
  }
  throw new Error("expected the call to fail");
}

export async function exportError(client: Client<typeof ExportService>, request: Request): Promise<AppError> {
  try {
    await exportPage(client, request);
  } catch (err) {
    return err as AppError;
  }
  throw new Error("expected the export to fail");
}

export interface AttributeDef {
  id: string;
  kind: string;
  key: string;
  name: string;
  type: AttributeType;
}

/**
 * Registers a fixed dataset the way the schema service does (core columns, then one column per
 * custom attribute). Column keys of attributes are their raw keys here (naming is tested elsewhere).
 */
export async function registerFixedDataset(pool: Pool, organizationId: string, key: string, attributes: AttributeDef[] = []): Promise<ColumnSpec[]> {
  const definition = FIXED_DATASETS_BY_KEY.get(key);
  if (!definition) throw new Error(`no fixed dataset ${key}`);
  const columns: ColumnSpec[] = [
    ...definition.coreColumns.map((c) => ({ ...c, source: { kind: "core" as const, name: c.key } })),
    ...attributes.map((a) => ({
      key: a.key,
      dataType: attributeDataType(a.type),
      label: a.name,
      source: { kind: "attribute" as const, attributeId: a.id, attributeType: a.type },
    })),
  ];
  await upsertRegistry(pool, organizationId, {
    key,
    kind: definition.family === "resource" ? "resource" : "deviations",
    sourceRef: definition.resourceKind ?? key,
    columns,
  });
  return columns;
}

export async function upsertRegistry(
  pool: Pool,
  organizationId: string,
  entry: { key: string; kind: string; sourceRef: string; columns: ColumnSpec[]; state?: string; tableName?: string; parentKey?: string },
): Promise<void> {
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, columns, shape_fingerprint, state, table_name, parent_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (organization_id, key) DO UPDATE SET columns = excluded.columns, shape_fingerprint = excluded.shape_fingerprint,
       state = excluded.state, table_name = excluded.table_name`,
    [
      organizationId,
      entry.key,
      entry.kind,
      entry.sourceRef,
      JSON.stringify(entry.columns),
      shapeFingerprint(entry.columns),
      entry.state ?? "ready",
      entry.tableName ?? null,
      entry.parentKey ?? null,
    ],
  );
  // Our registry rows are current: no sync pending (attribute inserts and org set-up queue one).
  await pool.query("DELETE FROM registry_sync_queue WHERE organization_id = $1", [organizationId]);
}
