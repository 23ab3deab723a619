import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ERROR_CATALOGUE, type ErrorCode } from "@exportsvc/common";

// docs/errors.md is the page problem `type` links point into (`<base>#<ERROR_CODE>`): one entry per
// catalogued code, headed with the catalogue's status and title.
const page = readFileSync(join(__dirname, "..", "..", "..", "docs", "errors.md"), "utf8");

describe("docs/errors.md", () => {
  it("has an anchored entry for every code of the error catalogue, with its status and title", () => {
    const missing = (Object.keys(ERROR_CATALOGUE) as ErrorCode[]).filter((code) => {
      const { status, title } = ERROR_CATALOGUE[code];
      return !page.includes(`<a id="${code}"></a>\n### ${status} \`${code}\` — ${title}\n`);
    });
    expect(missing).toEqual([]);
  });
});
