/**
 * The OpenAPI description checked by third-party tools as its users run them: the official OpenAPI
 * JSON schema (@seriousme/openapi-schema-validator), Spectral's default `spectral:oas` ruleset, and
 * every example and the API's own value forms against the document's schemas with strict Ajv.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { OpenApiValidator } from "../../../test/support/openapi";
import { parseInstantMicros } from "../src/csv/timestamp";
import { buildOpenApiDocument } from "../src/openapi/document";
import { onDemandBin } from "../../../scripts/tools/on-demand";

const run = promisify(execFile);
const BIN = join(__dirname, "..", "..", "..", "node_modules", ".bin");
const doc = buildOpenApiDocument("0.1.0") as any;
const CSV_PATH = "/v1/datasets/{datasetKey}/csv";

let dir: string;
let file: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "openapi-validate-"));
  file = join(dir, "swagger.json");
  writeFileSync(file, JSON.stringify(doc));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("OpenAPI description under third-party validators", () => {
  it("matches the official OpenAPI 3.0 JSON schema (@seriousme/openapi-schema-validator)", async () => {
    const { stdout } = await run(join(BIN, "validate-api"), [file]);
    expect(JSON.parse(stdout)).toEqual({ valid: true });
  });

  it("is clean under Spectral's default ruleset (spectral:oas): no error, warning, info or hint", async () => {
    const ruleset = join(__dirname, "..", ".spectral.yaml");
    const { stdout } = await run(onDemandBin("@stoplight/spectral-cli", "spectral"), ["lint", "--ruleset", ruleset, "--format", "json", "--fail-severity", "hint", file], {
      env: { ...process.env, NO_COLOR: "1" },
    }).catch((e) => e);
    const results = JSON.parse(stdout.slice(stdout.indexOf("["), stdout.lastIndexOf("]") + 1));
    expect(results).toEqual([]);
  });

  it("has info.contact", () => {
    expect(doc.info.contact).toMatchObject({ name: expect.any(String), url: expect.any(String) });
  });

  it("every parameter and response example matches its schema under strict Ajv with ajv-formats", () => {
    const validator = new OpenApiValidator(doc);
    let checked = 0;
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        for (const parameter of operation.parameters ?? []) {
          const values = [parameter.example, ...Object.values<any>(parameter.examples ?? {}).map((e) => e.value)].filter((v) => v !== undefined);
          for (const value of values) {
            validator.validateParameter(path, method as "get", parameter.name, value);
            checked++;
          }
        }
        for (const [status, response] of Object.entries<any>(operation.responses)) {
          for (const [mediaType, content] of Object.entries<any>(response.content ?? {})) {
            const values = [content.example, ...Object.values<any>(content.examples ?? {}).map((e) => e.value)].filter((v) => v !== undefined);
            for (const value of values) {
              validator.validate(path, method as "get", Number(status), mediaType, value);
              checked++;
            }
          }
        }
      }
    }
    // 3 instant parameters x 2 examples, the CSV example, and one problem example per (status, errorCode).
    expect(checked).toBeGreaterThan(30);
  });

  it("documents cursorProblem on the problem body, with an INVALID_CURSOR example carrying it", () => {
    const problem = doc.components.schemas.Problem.properties.cursorProblem;
    expect(problem.enum).toEqual(expect.arrayContaining(["empty", "not_a_cursor", "truncated", "altered", "retired_version", "unknown_signing_key", "other_dataset", "reshaped_dataset"]));
    const example = doc.paths[CSV_PATH].get.responses["400"].content["application/problem+json"].examples.INVALID_CURSOR.value;
    expect(problem.enum).toContain(example.cursorProblem);
  });

  describe("modifiedSince, from, to accept what the API returns and what the gateway parses", () => {
    const validator = new OpenApiValidator(doc);
    const accepted = [
      "2026-11-23 15:27:53.708955+00", // last_modified exactly as the CSV writes it
      "2026-11-23 15:27:53+00",
      "2026-11-23T15:27:53.708955Z",
      "2026-11-23T15:27:53+01:00",
      "2026-11-23t15:27:53.1-0530",
    ];
    const refused = ["2026-11-23 15:27:53.708955 00", "2026-11-23 15:27:53", "2026-11-23", "yesterday", "2026-11-23T15:27:53.708955Z "];

    it.each(["modifiedSince", "from", "to"])("%s: no format: date-time, a pattern instead", (name) => {
      const parameter = doc.paths[CSV_PATH].get.parameters.find((p: any) => p.name === name);
      expect(parameter.schema.format).toBeUndefined();
      for (const value of accepted) {
        expect(parseInstantMicros(value)).toBeDefined();
        expect(() => validator.validateParameter(CSV_PATH, "get", name, value)).not.toThrow();
      }
      for (const value of refused) {
        expect(parseInstantMicros(value)).toBeUndefined();
        expect(() => validator.validateParameter(CSV_PATH, "get", name, value)).toThrow(/does not match/);
      }
    });
  });
});
