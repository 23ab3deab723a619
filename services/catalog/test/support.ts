import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { CatalogService } from "@exportsvc/proto";
import { createClient, fromServiceError, type Client } from "@exportsvc/rpc";
import { shapeFingerprint, type ColumnSpec } from "@exportsvc/datasets";
import { testDatabaseUrl } from "../../../test/support/db";
import { start as startSchema, loadSchemaConfig } from "../../schema/src";
import { loadCatalogConfig, start as startCatalog } from "../src";

export interface CatalogHarness {
  client: Client<typeof CatalogService>;
  /** The catalog's gRPC address, for clients with other channel options. */
  address: string;
  stop(): Promise<void>;
}

/** Schema and catalog services in-process, talking real gRPC on free ports. */
export async function startCatalogHarness(): Promise<CatalogHarness> {
  const common = { DATABASE_URL: testDatabaseUrl(), GRPC_HOST: "127.0.0.1", GRPC_PORT: "0", LOG_LEVEL: "silent", SHUTDOWN_GRACE_MS: "1000" };
  const schema = await startSchema(loadSchemaConfig({ ...common, REGISTRY_POLL_MS: "600000", FORM_DATASETS_MAINTENANCE: "false" }));
  const catalog = await startCatalog(loadCatalogConfig({ ...common, SCHEMA_ADDRESS: `127.0.0.1:${schema.port}` }));
  const client = createClient(CatalogService, `127.0.0.1:${catalog.port}`);
  return {
    client,
    address: `127.0.0.1:${catalog.port}`,
    stop: async () => {
      client.close();
      await catalog.stop();
      await schema.stop();
    },
  };
}

/** A form dataset row as the form-dataset materializer would write it. */
export async function insertFormDataset(
  pool: Pool,
  org: string,
  d: { key: string; kind: "submission" | "grid"; displayName: string; parentKey?: string; state?: string; label?: string },
): Promise<void> {
  const columns: ColumnSpec[] = [
    { key: "id", dataType: "uuid", label: "ID", source: { kind: "table", column: "id" } },
    { key: "temperature", dataType: "number", label: d.label ?? "Temperature", source: { kind: "table", column: "c1" } },
    { key: "last_modified", dataType: "dateTime", label: "Last Modified", source: { kind: "table", column: "last_modified" } },
  ];
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, display_name, parent_key, columns, shape_fingerprint, state, table_name)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)`,
    [org, d.key, d.kind, randomUUID(), d.displayName, d.parentKey ?? null, JSON.stringify(columns), shapeFingerprint(columns), d.state ?? "ready", `form_ds.t_${d.key}`],
  );
}

/** A listing entry as the API shows it (what the catalog's stream carries, parsed). */
export interface ApiListingEntry {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: string[];
  columns: { key: string; dataType: string; label?: string }[];
  links: { csv: string; deletions?: string };
  changeToken: string;
  rewriteToken?: string;
}

export interface CollectedListing {
  etag: string;
  notModified: boolean;
  datasets: ApiListingEntry[];
  /** Entry pieces the stream carried. */
  pieces: number;
}

/** Reads ListDatasets' whole stream: the head, then the entry pieces joined into the JSON array. */
export async function collectListing(
  client: Client<typeof CatalogService>,
  request: { organizationId: string; ifNoneMatch?: string },
): Promise<CollectedListing> {
  let head: { etag: string; notModified: boolean } | undefined;
  const pieces: Buffer[] = [];
  try {
    for await (const message of client.listDatasets(request)) {
      if (message.part.case === "head") {
        if (head || pieces.length) throw new Error("head not first, or twice");
        head = message.part.value;
      } else if (message.part.case === "entries") {
        if (!head) throw new Error("entries before the head");
        pieces.push(Buffer.from(message.part.value));
      } else throw new Error("empty message");
    }
  } catch (err) {
    // The AppError the catalog raised, as the gateway sees it.
    throw fromServiceError(err);
  }
  if (!head) throw new Error("no head");
  const datasets = JSON.parse(`[${Buffer.concat(pieces).toString("utf8")}]`) as ApiListingEntry[];
  return { etag: head.etag, notModified: head.notModified, datasets, pieces: pieces.length };
}

/** The entries of a ListDatasets result (its rendered pieces), parsed. */
export function entriesOf(result: { pieces: readonly Buffer[] }): ApiListingEntry[] {
  return JSON.parse(`[${Buffer.concat(result.pieces).toString("utf8")}]`) as ApiListingEntry[];
}
