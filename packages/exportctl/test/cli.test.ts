import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { Pool } from "pg";
import { hashApiKeySecret } from "@exportsvc/common";
import { createOrm, type MikroORM } from "@exportsvc/db";
import { createOrganization, listKeys, revokeKey, setOrganizationEnabled } from "@exportsvc/exportctl";
import { testDatabaseUrl, testPool } from "../../../test/support/db";
import { CHILD_PROCESS_TIMEOUT, ROOT, runExportctl } from "./support/run-exportctl";

const SECRET = "test-key-hash-secret-0123456789";
const EXAMPLE_ORG = "7b0c2f4e-1d3a-4c5b-8e6f-9a0b1c2d3e4f";

const exportctl = (args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}) =>
  runExportctl(args, { ...opts, env: { KEY_HASH_SECRET: SECRET, ...opts.env } });

let pool: Pool;
let orm: MikroORM;
beforeAll(async () => {
  pool = testPool();
  orm = await createOrm(testDatabaseUrl(), 1);
});
afterAll(async () => {
  await orm.close(true);
  await pool.end();
});

describe("exportctl CLI", () => {
  test("org create / list, keys issue / list / revoke", async () => {
    const id = randomUUID();
    const created = await exportctl(["--json", "org", "create", "--name", "Acme Foods", "--id", id, "--enable"]);
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toEqual({ id, name: "Acme Foods", exportEnabled: true, created: true });
    expect((await pool.query("SELECT export_enabled FROM export_organizations WHERE organization_id = $1", [id])).rows[0].export_enabled).toBe(true);

    const listed = await exportctl(["org", "list", "--json"]);
    expect(JSON.parse(listed.stdout).find((o: { id: string }) => o.id === id)).toMatchObject({ name: "Acme Foods", exportEnabled: true, activeKeys: 0 });

    const issued = await exportctl(["keys", "issue", "--org", id, "--description", "loader for BI", "--json"]);
    expect(issued.code).toBe(0);
    const key = JSON.parse(issued.stdout) as { keyId: string; secret: string };
    expect(key.keyId).toMatch(/^ak_[0-9A-Za-z]{16}$/);
    expect(key.secret).toMatch(/^ak_[0-9A-Za-z]{40}$/);
    const stored = await pool.query("SELECT secret_hash, description FROM api_keys WHERE id = $1", [key.keyId]);
    expect(stored.rows[0]).toEqual({ secret_hash: hashApiKeySecret(key.secret, SECRET), description: "loader for BI" });

    const keys = await exportctl(["keys", "list", "--org", id]);
    expect(keys.code).toBe(0);
    expect(keys.stdout).toContain(key.keyId);
    expect(keys.stdout).not.toContain(key.secret);
    expect(keys.stdout).not.toContain(stored.rows[0].secret_hash);

    const revoked = await exportctl(["keys", "revoke", key.keyId]);
    expect(revoked.code).toBe(0);
    expect((await pool.query("SELECT revoked_at FROM api_keys WHERE id = $1", [key.keyId])).rows[0].revoked_at).not.toBeNull();
  }, CHILD_PROCESS_TIMEOUT);

  test("apply reads YAML files and JSON from stdin; errors exit non-zero without a stack trace", async () => {
    await createOrganization(pool, { name: "Example Bakery", id: EXAMPLE_ORG });
    const yaml = await exportctl(["apply", join(ROOT, "examples", "demo.yaml")]);
    expect(yaml.stderr).not.toContain("exportctl:");
    expect(yaml.code).toBe(0);
    expect(yaml.stdout).toMatch(/suppliers\s+1\s+0\s+0\s+0/);
    const lot = await pool.query("SELECT code, path FROM lots JOIN sites s ON s.organization_id = lots.organization_id AND s.id = lots.site_id WHERE lots.organization_id = $1", [EXAMPLE_ORG]);
    expect(lot.rows[0].code).toBe("RYE-0001");

    const json = JSON.stringify({ organization: EXAMPLE_ORG, teams: [{ id: randomUUID(), name: "Night shift" }] });
    const fromStdin = await exportctl(["apply", "-", "--json"], { input: json });
    expect(fromStdin.code).toBe(0);
    expect(JSON.parse(fromStdin.stdout).sections.teams).toEqual({ inserted: 1, updated: 0, unchanged: 0, deleted: 0 });

    const unknown = randomUUID();
    const bad = await exportctl(["apply", "-"], { input: JSON.stringify({ organization: EXAMPLE_ORG, lots: [{ id: randomUUID(), productId: unknown }] }) });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`lots[0].productId: unknown product ${unknown}`);
    expect(bad.stderr).not.toMatch(/\bat .+\.ts:\d+/);

    const missingEnv = await exportctl(["org", "list"], { env: { DATABASE_URL: undefined } });
    expect(missingEnv.code).toBe(1);
    expect(missingEnv.stderr).toContain("DATABASE_URL");
    const missingSecret = await exportctl(["keys", "issue", "--org", EXAMPLE_ORG, "--description", "x"], { env: { KEY_HASH_SECRET: "short" } });
    expect(missingSecret.code).toBe(1);
    expect(missingSecret.stderr).toContain("KEY_HASH_SECRET");

    const migrated = await exportctl(["migrate"]);
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toContain("database is up to date");

    const usage = await exportctl(["keys", "issue"]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/required option/);
  }, CHILD_PROCESS_TIMEOUT);

  test("enable/disable and revoke functions report unchanged states and unknown ids", async () => {
    const org = (await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'X') RETURNING id::text", [randomUUID()])).rows[0].id as string;
    expect(await setOrganizationEnabled(pool, org, true)).toEqual({ id: org, exportEnabled: true, changed: true });
    expect(await setOrganizationEnabled(pool, org, true)).toEqual({ id: org, exportEnabled: true, changed: false });
    expect(await setOrganizationEnabled(pool, org, false)).toMatchObject({ exportEnabled: false, changed: true });
    await expect(setOrganizationEnabled(pool, randomUUID(), true)).rejects.toThrow(/does not exist/);
    await expect(revokeKey(orm, "ak_doesnotexist0000")).rejects.toThrow(/no API key/);
    expect(await listKeys(orm, { organizationId: org })).toEqual([]);
  });
  test("forms rebuild queues the organization's published, live forms (or the ones named); bad input is refused before anything is queued", async () => {
    const org = randomUUID();
    await createOrganization(pool, { name: "Rebuild Foods", id: org });
    const form = async (name: string, opts: { published: boolean; deleted?: boolean }) => {
      const id = randomUUID();
      await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix, deleted_at) VALUES ($1, $2, $3, 'R', $4)", [org, id, name, opts.deleted ? new Date() : null]);
      await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, '[]', $3)", [org, id, opts.published ? new Date() : null]);
      return id;
    };
    const [a, b] = [await form("A", { published: true }), await form("B", { published: true })];
    await form("Draft", { published: false });
    await form("Gone", { published: true, deleted: true });
    const queued = async () =>
      (await pool.query<{ form_id: string }>("SELECT form_id FROM form_dataset_changes WHERE organization_id = $1 AND kind = 'rebuild' ORDER BY seq", [org])).rows.map((r) => r.form_id);
    // Publishing queued its own requests: start from none.
    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);

    const all = await exportctl(["--json", "forms", "rebuild", "--org", org]);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout)).toEqual({ organizations: 1, forms: { [org]: [a, b].sort() } });
    expect((await queued()).sort()).toEqual([a, b].sort());

    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    const one = await exportctl(["forms", "rebuild", "--org", org, "--form", b]);
    expect(one.code).toBe(0);
    expect(one.stdout).toContain("queued rebuilds of 1 form(s) in 1 organization(s)");
    expect(await queued()).toEqual([b]);

    await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    const unknownForm = randomUUID();
    for (const [args, message] of [
      [["forms", "rebuild", "--org", org, "--form", a, unknownForm], `no such form in organization ${org}: ${unknownForm}`],
      [["forms", "rebuild", "--org", "not-a-uuid"], "--org must be a uuid, got 'not-a-uuid'"],
      [["forms", "rebuild", "--org", randomUUID().replace(/.$/, "0")], "does not exist"],
      [["forms", "rebuild"], "give either --org <id> or --all"],
      [["forms", "rebuild", "--all", "--form", a], "--form needs --org"],
    ] as const) {
      const r = await exportctl([...args]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(message);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(await queued()).toEqual([]);
  }, CHILD_PROCESS_TIMEOUT);

  test("forms rebuild --all queues the published, live forms of every organization", async () => {
    const orgs = [randomUUID(), randomUUID()];
    const published: Record<string, string> = {};
    for (const [i, org] of orgs.entries()) {
      await createOrganization(pool, { name: `Rebuild all ${i}`, id: org });
      for (const state of ["published", "draft"] as const) {
        const id = randomUUID();
        await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, $3, 'R')", [org, id, state]);
        await pool.query("INSERT INTO form_versions (organization_id, form_id, version, fields, published_at) VALUES ($1, $2, 1, '[]', $3)", [org, id, state === "published" ? new Date() : null]);
        if (state === "published") published[org] = id;
      }
      await pool.query("DELETE FROM form_dataset_changes WHERE organization_id = $1", [org]);
    }
    // The shared test database holds other tests' organizations too: the requests this call queues
    // for them are removed afterwards (seq after the current last one).
    const lastSeq = (await pool.query<{ seq: string }>("SELECT coalesce(max(seq), 0)::text AS seq FROM form_dataset_changes")).rows[0].seq;
    try {
      const r = await exportctl(["--json", "forms", "rebuild", "--all"]);
      expect(r.code).toBe(0);
      const answer = JSON.parse(r.stdout) as { organizations: number; forms: Record<string, string[]> };
      for (const org of orgs) expect(answer.forms[org]).toEqual([published[org]]);
      expect(answer.organizations).toBe(Object.keys(answer.forms).length);
      const queuedHere = await pool.query<{ organization_id: string; form_id: string }>(
        "SELECT organization_id::text, form_id::text FROM form_dataset_changes WHERE organization_id = ANY($1::uuid[]) AND kind = 'rebuild' ORDER BY organization_id",
        [orgs],
      );
      expect(queuedHere.rows).toEqual(orgs.sort().map((org) => ({ organization_id: org, form_id: published[org] })));
    } finally {
      await pool.query("DELETE FROM form_dataset_changes WHERE kind = 'rebuild' AND seq > $1::bigint", [lastSeq]);
    }
  }, CHILD_PROCESS_TIMEOUT);
});
