import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { onDemandBin } from "../../../scripts/tools/on-demand";
import { buildOpenApiDocument } from "../src/openapi/document";

const run = promisify(execFile);
/** Not in npm install: installed on first use at its pinned version. */
const redocly = () => onDemandBin("@redocly/cli", "redocly");

describe("OpenAPI description lint (same as npm run lint:openapi)", () => {
  it("passes redocly's recommended ruleset with no errors and no warnings", async () => {
    const dir = mkdtempSync(join(tmpdir(), "openapi-"));
    const file = join(dir, "swagger.json");
    writeFileSync(file, JSON.stringify(buildOpenApiDocument("0.1.0")));
    try {
      const { stdout, stderr } = await run(redocly(), ["lint", "--format=stylish", file], {
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
      });
      const output = `${stdout}\n${stderr}`;
      expect(output).toContain("Your API description is valid");
      expect(output).not.toMatch(/You have \d+ warnings?/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
