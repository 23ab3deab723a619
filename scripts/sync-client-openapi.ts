/**
 * Refreshes the sync client's copy of the OpenAPI document (packages/sync-client/src/api/openapi.json)
 * from the gateway's document and regenerates its types (openapi.ts). The client itself never
 * imports the gateway; a test fails when the copy is stale. Usage: `npm run sync-client:openapi`.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildOpenApiDocument } from "@exportsvc/gateway";

const dir = join(__dirname, "..", "packages", "sync-client");
const snapshot = join(dir, "src", "api", "openapi.json");
const version = (JSON.parse(readFileSync(snapshot, "utf8")) as { info: { version: string } }).info.version;
writeFileSync(snapshot, JSON.stringify(buildOpenApiDocument(version), null, 2) + "\n");
execFileSync(process.execPath, [join(__dirname, "..", "node_modules", "openapi-typescript", "bin", "cli.js"), "src/api/openapi.json", "-o", "src/api/openapi.ts"], { cwd: dir, stdio: "inherit" });
