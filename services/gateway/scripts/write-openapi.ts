/**
 * Writes the OpenAPI description served at /swagger/v1/swagger.json to a file (default
 * dist/swagger.json), for `npm run lint:openapi` and for publishing alongside a release.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { buildOpenApiDocument } from "../src/openapi/document";

const target = resolve(process.argv[2] ?? "dist/swagger.json");
mkdirSync(dirname(target), { recursive: true });
writeFileSync(target, `${JSON.stringify(buildOpenApiDocument(process.env.APP_VERSION ?? "0.1.0"), null, 2)}\n`);
process.stdout.write(`wrote ${target}\n`);
