/**
 * The sync client is an independent consumer: it imports no package of this repository, and its
 * API types come from the OpenAPI document the gateway serves (snapshot in src/api/openapi.json).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { buildOpenApiDocument } from "../../../services/gateway/src/openapi/document";

const SRC = join(__dirname, "..", "src");
const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));

describe("sync-client stands alone", () => {
  it("imports nothing of the repository's server packages and declares every library it imports", () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8"));
    // An optional peer (better-sqlite3, for the sqlite: target) is declared too: its user installs it.
    const declared = new Set([...Object.keys(pkg.dependencies), ...Object.keys(pkg.optionalDependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})]);
    const imported = new Set<string>();
    for (const file of files(SRC)) {
      for (const m of readFileSync(file, "utf8").matchAll(/(?:from|import\()\s*"([^"]+)"/g)) {
        const spec = m[1];
        expect({ file, spec }).not.toEqual({ file, spec: expect.stringMatching(/^@exportsvc\//) });
        if (spec.startsWith(".")) expect(join(file, "..", spec).startsWith(SRC)).toBe(true);
        else if (!spec.startsWith("node:")) imported.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);
      }
    }
    for (const lib of imported) expect({ lib, declared: declared.has(lib) }).toEqual({ lib, declared: true });
    expect(pkg).toMatchObject({ bin: { "dataset-sync": "dist/cli.js" }, types: "dist/index.d.ts", files: expect.arrayContaining(["dist", "README.md"]) });
    expect(pkg.private).toBeUndefined();
  });

  it("its OpenAPI snapshot is the document the gateway serves (refresh with npm run sync-client:openapi after a change)", () => {
    const snapshot = JSON.parse(readFileSync(join(SRC, "api", "openapi.json"), "utf8"));
    const served = JSON.parse(JSON.stringify(buildOpenApiDocument(snapshot.info.version)));
    expect(snapshot).toEqual(served);
  });
});
