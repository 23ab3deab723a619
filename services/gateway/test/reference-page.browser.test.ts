/**
 * GET /docs in a real browser: Debian's chromium driven by playwright-core renders the Redoc page
 * from assets the gateway serves itself. Without chromium this suite fails saying it could not run
 * (it never passes silently): install it with `apt-get install chromium` (.ci/run does).
 */
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "../../../test/support/linked/playwright-core";
import { chromium, type Browser } from "playwright-core";
import { ERROR_CODES } from "../src/openapi/document";
import { startHarness, type Harness } from "./support/harness";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// The screenshot kept in docs/ is refreshed with UPDATE_DOCS_SCREENSHOT=1; otherwise it goes to a temp dir.
const SCREENSHOT = process.env.UPDATE_DOCS_SCREENSHOT
  ? join(__dirname, "..", "..", "..", "docs", "api-reference.png")
  : join(tmpdir(), `api-reference-${process.pid}.png`);

let h: Harness;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `COULD NOT RUN: no chromium at ${CHROMIUM}. Install Debian's chromium (apt-get install chromium; .ci/run does) ` +
        "or point CHROMIUM_PATH at a Chromium binary. The /docs browser test did not run.",
    );
  }
  h = await startHarness();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe("GET /docs in headless Chromium", () => {
  it("renders both data endpoints, their parameters and every error code, from the gateway's own assets only", async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const origin = new URL(h.url).origin;
    const isForeign = (url: string) => !url.startsWith(origin) && !url.startsWith("data:") && !url.startsWith("blob:");
    const foreignAttempted: string[] = [];
    const foreignLoaded: string[] = [];
    const failedOwn: string[] = [];
    page.on("request", (request) => isForeign(request.url()) && foreignAttempted.push(request.url()));
    page.on("requestfinished", (request) => isForeign(request.url()) && foreignLoaded.push(request.url()));
    page.on("requestfailed", (request) => !isForeign(request.url()) && failedOwn.push(request.url()));
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(String(error)));

    const response = await page.goto(`${h.url}/docs`, { waitUntil: "networkidle" });
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'self'");
    // Locators, not page.waitForFunction: a waitForFunction predicate that is not true at once is
    // re-run by the page's own timers, where the page's CSP (no 'unsafe-eval') forbids evaluating it.
    // Locators run in Playwright's isolated world, which the page's CSP does not govern.
    await page.getByRole("heading", { name: "Stream one page of a dataset as CSV" }).waitFor({ state: "visible", timeout: 30_000 });

    const text = await page.locator("body").innerText();
    expect(text).toContain("Dataset Export API");
    expect(text).toContain("List the organization's datasets with their current columns");
    expect(text).toContain("Stream one page of a dataset as CSV");
    expect(text).toContain("/v1/datasets");
    expect(text).toContain("/v1/datasets/{datasetKey}/csv");
    for (const parameter of ["datasetKey", "cursor", "modifiedSince", "after", "afterRowIndex", "limit", "from", "to", "If-None-Match"]) {
      expect({ parameter, shown: text.includes(parameter) }).toEqual({ parameter, shown: true });
    }
    for (const { errorCode } of ERROR_CODES) {
      expect({ errorCode, shown: text.includes(errorCode) }).toEqual({ errorCode, shown: true });
    }
    // Nothing is loaded from elsewhere. Redoc's bundle hard-codes one image (its "API docs by Redocly"
    // logo on a CDN); the page's Content-Security-Policy makes the browser refuse it.
    expect(foreignLoaded).toEqual([]);
    expect(foreignAttempted.filter((url) => url !== "https://cdn.redoc.ly/redoc/logo-mini.svg")).toEqual([]);
    expect(failedOwn).toEqual([]);
    expect(errors).toEqual([]);

    const png = await page.screenshot({ path: SCREENSHOT });
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    if (!process.env.UPDATE_DOCS_SCREENSHOT) rmSync(SCREENSHOT, { force: true });
    await page.close();
  }, 90_000);

  it("serves the Redoc bundle itself", async () => {
    const res = await fetch(`${h.url}/docs/assets/redoc.standalone.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("javascript");
    expect((await res.text()).length).toBeGreaterThan(100_000);
  });
});
