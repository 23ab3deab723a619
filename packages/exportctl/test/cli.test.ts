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
});
