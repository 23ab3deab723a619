/**
 * Issue 12, item 2: a cut page must never pass for a complete one. `curl -0` (HTTP/1.0: no chunking,
 * no length) used to exit 0 with part of a page when the export service was killed mid-page; it is
 * now refused, and over HTTP/1.1 the same kill leaves the chunked body without its final chunk,
 * which curl reports as an error.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startE2E, type E2E } from "../support/fixture";
import { runningCopies, seedLargeSuppliers, waitUntil } from "../../scripts/lib/stalled-readers";

const curlAvailable = !spawnSync("curl", ["--version"]).error;
const itWithCurl = curlAvailable ? it : it.skip;

function curl(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("curl", args);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("cut pages over HTTP/1.0 and HTTP/1.1", () => {
  let e2e: E2E;
  let org: { organizationId: string; secret: string };
  beforeAll(async () => {
    e2e = await startE2E();
    org = await e2e.newOrganization();
    await seedLargeSuppliers(e2e.pool, org.organizationId, 5000);
  }, 180_000);
  afterAll(() => e2e?.stop());

  itWithCurl("curl -0 on the CSV endpoint gets 400 HTTP_VERSION_NOT_SUPPORTED as problem+json", async () => {
    const res = await curl(["-sS", "-0", "-H", `Authorization: Bearer ${org.secret}`, "-w", "\n%{http_code} %{content_type}", `${e2e.baseUrl}/v1/datasets/resources_suppliers/csv?limit=5000`]);
    expect(res.code).toBe(0);
    const lines = res.stdout.split("\n");
    expect(lines.at(-1)).toBe("400 application/problem+json");
    expect(JSON.parse(lines.slice(0, -1).join("\n"))).toMatchObject({ status: 400, errorCode: "HTTP_VERSION_NOT_SUPPORTED" });
  });

  itWithCurl("over HTTP/1.1 a page cut by a killed export service makes curl fail (no final chunk)", async () => {
    // curl reads slowly (rate-limited), so the page is still streaming when the export service dies.
    const body = join(mkdtempSync(join(tmpdir(), "cut-page-")), "page.csv");
    const reading = curl(["-sS", "--http1.1", "--limit-rate", "2M", "-o", body, "-H", `Authorization: Bearer ${org.secret}`, `${e2e.baseUrl}/v1/datasets/resources_suppliers/csv?limit=5000`]);
    await waitUntil(async () => (await runningCopies(e2e.pool, org.organizationId)) > 0, "the page to be streaming");
    // Past the 64 KiB head (the 200 is committed): curl has written more than that of the body. At
    // 2 MB/s the 40 MB page is far from its end.
    const received = () => (existsSync(body) ? statSync(body).size : 0);
    await waitUntil(async () => received() > 128 * 1024, "curl to have received more than the page's head");
    e2e.stack.processes.export.kill("SIGKILL");
    const res = await reading;
    expect(res.code).not.toBe(0);
    // 18: partial file (transfer closed with outstanding read data remaining); 56: receive failure.
    expect([18, 56]).toContain(res.code);
  }, 120_000);
});
