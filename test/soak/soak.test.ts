import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * CI's soak (issue 30): 60 seconds × 20 organizations of mixed sizes on a stack of its own (its own
 * PostgreSQL, Redis and four service processes), each organization's consumer polling with
 * If-None-Match and syncing through the sync client's engine while the generator churns. It checks
 * the verdict (every copy equal to a fresh full export and to the source) and that no response was
 * ≥ 500 — never a latency or memory figure (those are `npm run soak`'s report, docs/soak.md).
 */
const ROOT = join(__dirname, "..", "..");

function soak(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts", "soak.ts"), ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-20_000)));
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("npm run soak", () => {
  it("names a misspelt or invalid flag without a stack trace (exit 2)", async () => {
    const typo = await soak(["--minuts", "1", "--orgs", "2"], 60_000);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("unknown option '--minuts'");
    expect(typo.stderr).toContain("--minutes");
    const bad = await soak(["--minutes", "1", "--orgs", "two"], 60_000);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--orgs <n>' argument 'two' is invalid/);
    const missing = await soak(["--orgs", "2"], 60_000);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--minutes must be given");
    for (const r of [typo, bad, missing]) expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("keeps 20 organizations' copies equal to their sources for a minute with no response ≥ 500", async () => {
    const out = mkdtempSync(join(tmpdir(), "soak-ci-"));
    try {
      const r = await soak(["--minutes", "1", "--orgs", "20", "--seed", "30", "--out", out, "--png", ""], 12 * 60_000);
      // Before the report is read: a run that ended early has written none, and its output says why.
      if (r.code !== 0) process.stderr.write(`${r.stdout}\n${r.stderr.slice(-6000)}\n`);
      const report = JSON.parse(readFileSync(join(out, "soak-report.json"), "utf8"));
      expect(report.options.orgs).toBe(20);
      expect(report.changesWritten).toBeGreaterThan(0);
      expect(report.consumers.passes).toBeGreaterThan(20);
      // Every listing answered 200 or 304 (how many 304s depends on how busy the machine is).
      expect(Object.keys(report.overall.listing.statuses).every((s) => s === "200" || s === "304")).toBe(true);
      // Latency is judged from the baseline (the middle of a one-minute run): a later part of the same requests.
      expect(report.fromBaseline.listing.requests).toBeGreaterThan(0);
      expect(report.fromBaseline.listing.requests).toBeLessThan(report.overall.listing.requests);
      expect(report.targets.map((t: { name: string }) => t.name)).toContainEqual(expect.stringMatching(/^listing p99 < 50 ms from minute 0\.\d$/));
      expect(report.serverErrors).toBe(0);
      expect(report.totals).toMatchObject({ lost: 0, duplicated: 0, stale: 0, extra: 0, deletedInSource: 0, gridEmptied: 0, rewritten: 0, exportVsSource: 0, unretiredKeys: 0 });
      expect(report.failedOrganizations).toEqual([]);
      expect(report.problems).toEqual([]);
      expect(report.passed).toBe(true);
      expect(r.code).toBe(0);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 15 * 60_000);
});
