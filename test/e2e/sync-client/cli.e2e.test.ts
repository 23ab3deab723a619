/**
 * The `dataset-sync` CLI as a process against the real stack: killed with SIGKILL mid-sync and
 * restarted, it ends with no duplicate and no gap (verify passes); watch syncs what moved and stops
 * cleanly on SIGTERM; status reports per dataset; the key never appears in any output.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startE2E, type E2E } from "../../support/fixture";
import { waitFor } from "../../support/forms";
import { startTcpProxy, viaProxy } from "../../support/tcp-proxy";
import { copyRows, hasUniqueKey, jsonLines, newPostgresTarget, newSqliteTarget, runCli, type CliRun, type TargetDb, TARGET_KINDS, newTarget } from "./harness";
import { expectCopyEqualsSource, hygieneOrg } from "./shared";

describe("dataset-sync CLI", () => {
  let e2e: E2E;
  const targets: TargetDb[] = [];
  const outputs: CliRun[] = [];
  /** Temporary directories (one holds an API key file), removed at the end. */
  const tempDirs: string[] = [];
  beforeAll(async () => {
    e2e = await startE2E();
  }, 120_000);
  afterAll(async () => {
    for (const run of outputs) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGKILL");
    for (const t of targets) await t.drop().catch(() => undefined);
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
    await e2e?.stop();
  });

  function cli(args: string[], env: Record<string, string>) {
    const run = runCli(args, env);
    outputs.push(run);
    return run;
  }

  it.each(TARGET_KINDS)("%s: SIGKILLed mid-sync three times and restarted, the copy has no duplicate and no gap", async (kind) => {
    const { org, id } = await hygieneOrg(e2e);
    await org.apply({ suppliers: Array.from({ length: 1500 }, (_, i) => ({ id: id(`s:${i}`), name: `Supplier ${i}`, description: "d".repeat(200) })) });
    const db = await newTarget(kind);
    targets.push(db);
    const env = { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: org.secret, SYNC_TARGET: db.url };
    for (const killAfterPages of [3, 7, 12]) {
      const run = cli(["sync", "--limit", "40"], env);
      await waitFor(`${killAfterPages} pages`, async () => jsonLines(run.stdout).filter((e) => e.event === "page").length >= killAfterPages, 60_000);
      run.child.kill("SIGKILL");
      expect((await run.exit).signal).toBe("SIGKILL");
    }
    const status = cli(["status", "--json"], env);
    expect((await status.exit).code).toBe(0);
    const suppliers = jsonLines(status.stdout).find((s) => s.dataset === "resources_suppliers")!;
    expect(suppliers).toMatchObject({ event: "status", inProgress: true, phase: "full" });
    expect(suppliers.rows).toBeGreaterThan(0);
    // The killed backfill was appending: its table's key is deferred until the read ends.
    if (kind !== "duckdb") expect(await hasUniqueKey(db, "resources_suppliers")).toBe(false);

    const finish = cli(["sync", "--limit", "40"], env);
    expect((await finish.exit).code).toBe(0);
    const summary = jsonLines(finish.stdout).find((e) => e.event === "summary")!;
    expect(summary.failed).toEqual([]);
    const rows = await copyRows(db, "resources_suppliers", ["id"]);
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
    expect(rows.length).toBe(1502);
    if (kind !== "duckdb") expect(await hasUniqueKey(db, "resources_suppliers")).toBe(true);
    await expectCopyEqualsSource(org, db);
    const verify = cli(["verify"], env);
    expect((await verify.exit).code).toBe(0);
    expect(jsonLines(verify.stdout).find((e) => e.event === "verify-summary")).toMatchObject({ differences: 0 });
    for (const run of outputs) expect(run.stdout.join("") + run.stderr.join("")).not.toContain(org.secret);
  }, 240_000);

  it("sync stopped by SIGTERM commits the page in progress, exits 130 and resumes where it stopped", async () => {
    const { org, id } = await hygieneOrg(e2e);
    await org.apply({ suppliers: Array.from({ length: 600 }, (_, i) => ({ id: id(`t:${i}`), name: `Supplier ${i}` })) });
    const db = await newSqliteTarget();
    targets.push(db);
    const env = { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: org.secret, SYNC_TARGET: db.url };
    const run = cli(["sync", "--limit", "20", "--datasets", "resources_suppliers"], env);
    await waitFor("2 pages", async () => jsonLines(run.stdout).filter((e) => e.event === "page").length >= 2, 60_000);
    run.child.kill("SIGTERM");
    expect((await run.exit).code).toBe(130);
    const events = jsonLines(run.stdout);
    expect(events.find((e) => e.event === "summary")).toMatchObject({ stopped: true, failed: [] });
    const committed = events.filter((e) => e.event === "page").reduce((n, e) => n + e.rows, 0);
    const rows = await copyRows(db, "resources_suppliers", ["id"]);
    // Every page reported was committed, and nothing else: the stop came between pages.
    expect(rows.length).toBe(committed);
    expect(rows.length).toBeLessThan(602);
    const finish = cli(["sync", "--limit", "20", "--datasets", "resources_suppliers"], env);
    expect((await finish.exit).code).toBe(0);
    expect((await copyRows(db, "resources_suppliers", ["id"])).length).toBe(602);
  }, 120_000);

  it("a --datasets key the listing does not have fails the run, naming the nearest key, for sync and verify", async () => {
    const { org } = await hygieneOrg(e2e);
    const db = await newSqliteTarget();
    targets.push(db);
    const env = { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: org.secret, SYNC_TARGET: db.url };
    const sync = cli(["sync", "--datasets", "resources_supplier,resources_customers", "--json"], env);
    expect((await sync.exit).code).toBe(1);
    const summary = jsonLines(sync.stdout).find((e) => e.event === "summary")!;
    expect(summary.synced).toEqual(["resources_customers"]);
    expect(summary.failed).toEqual([
      { dataset: "resources_supplier", message: "not in the listing (did you mean resources_suppliers?)", errorCode: "DATASET_NOT_LISTED" },
    ]);
    const verify = cli(["verify", "--datasets", "resources_supplier,resources_customers", "--json"], env);
    expect((await verify.exit).code).toBe(1);
    const results = jsonLines(verify.stdout).filter((e) => e.event === "verify");
    expect(results.map((r) => [r.dataset, r.ok, r.problem])).toEqual([
      ["resources_supplier", false, "not in the listing (did you mean resources_suppliers?)"],
      ["resources_customers", true, undefined],
    ]);
  }, 120_000);

  it("watch syncs what moved each interval and stops on SIGTERM after committing; verify then finds a tampered copy", async () => {
    const { org, id } = await hygieneOrg(e2e);
    const db = await newPostgresTarget();
    targets.push(db);
    const dir = mkdtempSync(join(tmpdir(), "sync-key-"));
    tempDirs.push(dir);
    const keyFile = join(dir, "key");
    writeFileSync(keyFile, `${org.secret}\n`, { mode: 0o600 });
    const env = { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY_FILE: keyFile, SYNC_TARGET: db.url };
    const watch = cli(["watch", "--interval", "300ms"], env);
    await waitFor("a first summary", async () => jsonLines(watch.stdout).some((e) => e.event === "summary" && e.synced.length > 0), 60_000);
    await org.apply({ suppliers: [{ id: id("sup:new"), name: "Umbrella" }] });
    await waitFor("the new supplier in the copy", async () => (await copyRows(db, "resources_suppliers", ["id"])).some((r) => r.id === id("sup:new")), 60_000);
    // Unchanged rounds cost one listing request each: 304s.
    await waitFor("an unchanged round", async () => jsonLines(watch.stdout).some((e) => e.event === "listing" && e.status === 304), 30_000);
    watch.child.kill("SIGTERM");
    expect(await watch.exit).toEqual({ code: 0, signal: null });
    expect(jsonLines(watch.stdout).some((e) => e.event === "signal" && e.signal === "SIGTERM")).toBe(true);

    const clean = cli(["verify"], env);
    expect((await clean.exit).code).toBe(0);
    const { Client } = await import("pg");
    const c = new Client({ connectionString: db.url });
    await c.connect();
    await c.query("DELETE FROM resources_suppliers WHERE id = $1", [id("sup:1")]);
    await c.end();
    const dirty = cli(["verify", "--json"], env);
    expect((await dirty.exit).code).toBe(1);
    const diff = jsonLines(dirty.stdout).find((e) => e.event === "verify" && e.dataset === "resources_suppliers")!;
    expect(diff).toMatchObject({ ok: false, source: { rows: 3 }, copy: { rows: 2 }, missing: 1, extra: 0, changed: 0, examples: [`missing id=${id("sup:1")}`] });
    for (const run of [watch, clean, dirty]) expect(run.stdout.join("") + run.stderr.join("")).not.toContain(org.secret);
  }, 120_000);

  it("watch rides out a target database outage: rounds fail and are reported, then the copy catches up", async () => {
    const { org, id } = await hygieneOrg(e2e);
    const db = await newPostgresTarget();
    targets.push(db);
    const url = new URL(db.url);
    const proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
    try {
      const env = { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: org.secret, SYNC_TARGET: viaProxy(db.url, proxy) };
      const watch = cli(["watch", "--interval", "300ms"], env);
      await waitFor("a first summary", async () => jsonLines(watch.stdout).some((e) => e.event === "summary" && e.synced.length > 0), 60_000);
      proxy.cut();
      await org.apply({ suppliers: [{ id: id("sup:outage"), name: "Hooli" }] });
      await waitFor("a failed round", async () => jsonLines(watch.stdout).some((e) => e.event === "run-error"), 30_000);
      proxy.restore();
      await waitFor("the new supplier in the copy", async () => (await copyRows(db, "resources_suppliers", ["id"])).some((r) => r.id === id("sup:outage")), 60_000);
      watch.child.kill("SIGTERM");
      expect((await watch.exit).code).toBe(0);
      await expectCopyEqualsSource(org, db);
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it("configuration errors name the variable and exit 64; a wrong key exits 2 without printing it", async () => {
    const missing = cli(["sync"], { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: "ak_x", SYNC_TARGET: "" });
    expect((await missing.exit).code).toBe(64);
    expect(missing.stderr.join("")).toContain("SYNC_TARGET");
    const badTarget = cli(["sync"], { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: "ak_x", SYNC_TARGET: "mysql://x" });
    expect((await badTarget.exit).code).toBe(64);
    const db = await newSqliteTarget();
    targets.push(db);
    const wrongKey = "ak_wrongwrongwrongwrongwrongwrongwrongwrong12";
    const unauthorized = cli(["sync"], { EXPORT_BASE_URL: e2e.baseUrl, EXPORT_API_KEY: wrongKey, SYNC_TARGET: db.url });
    expect((await unauthorized.exit).code).toBe(2);
    const fatal = jsonLines(unauthorized.stderr).find((e) => e.event === "fatal")!;
    expect(fatal.errorCode).toBe("UNAUTHORIZED");
    expect(unauthorized.stdout.join("") + unauthorized.stderr.join("")).not.toContain(wrongKey);
  }, 60_000);
});
