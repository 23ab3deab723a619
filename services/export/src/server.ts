import type { Pool } from "pg";
import type { Logger } from "@exportsvc/common";
import type { CursorCodec } from "@exportsvc/datasets";
import { ExportService } from "@exportsvc/proto";
import { addService, grpc } from "@exportsvc/rpc";
import { exportCsvHandler } from "./export-csv";

export interface ExportServerOptions {
  pool: Pool;
  codec: CursorCodec;
  logger: Logger;
  syncRegistry?: (organizationId: string) => Promise<void>;
  chunkBytes: number;
}

/** The gRPC server of the export service (not yet bound). */
export function createExportServer(opts: ExportServerOptions): grpc.Server {
  const server = new grpc.Server({
    // CSV chunks are tens of KiB; leave headroom for a few of them in one window.
    "grpc.max_send_message_length": 16 * 1024 * 1024,
  });
  addService(server, ExportService, { exportCsv: exportCsvHandler(opts) });
  return server;
}
