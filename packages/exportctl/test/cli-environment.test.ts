/**
 * exportctl against a wrong environment (a KEY_HASH_SECRET other than the gateway's, a database that
 * does not exist or was never migrated), `org delete`, and apply's progress output. Real processes,
 * real PostgreSQL.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import type { Pool } from "pg";
import { keyHashSecretVerifier } from "@exportsvc/common";
import { seedDemo } from "@exportsvc/exportctl";
import { createDatabase, databaseUrl, dropDatabase } from "@exportsvc/db";
import { buildDataset } from "@exportsvc/form-datasets";
import { testDatabaseUrl, testPool } from "../../../test/support/db";
import { CHILD_PROCESS_TIMEOUT, ROOT, runExportctl } from "./support/run-exportctl";

const exportctl = (args: string[], env: Record<string, string | undefined> = {}) => runExportctl(args, { env });

const withDatabase = (name: string) => databaseUrl(testDatabaseUrl(), name);
const noStack = (text: string) => expect(text).not.toMatch(/\bat .+\.(ts|js):\d+|unexpected failure/);

let pool: Pool;
beforeAll(() => {
  pool = testPool();
});
afterAll(() => pool.end());

describe("exportctl and a wrong environment", () => {
  test("a well-formed but wrong KEY_HASH_SECRET is refused once a verifier is recorded; nothing is issued", async () => {
    // The verifier is recorded by the first `keys issue` of this database (or was, by another suite of this run).
    const stored = await pool.query<{ verifier: string }>("SELECT verifier FROM key_hash_secret_verifier");
    const right = stored.rowCount === 0 ? "right-key-hash-secret-0123456789" : undefined;
    const org = randomUUID();
    expect((await exportctl(["org", "create", "--name", "Verifier Foods", "--id", org, "--enable"])).code).toBe(0);
    if (right) {
      const first = await exportctl(["keys", "issue", "--org", org, "--description", "first"], { KEY_HASH_SECRET: right });
      expect(first.code).toBe(0);
      expect((await pool.query("SELECT verifier FROM key_hash_secret_verifier")).rows[0].verifier).toBe(keyHashSecretVerifier(right));
    }
    const wrong = `wrong-${randomBytes(16).toString("hex")}`;
    const keysBefore = (await pool.query("SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1", [org])).rows[0].n;
    const refused = await exportctl(["keys", "issue", "--org", org, "--description", "with the wrong secret"], { KEY_HASH_SECRET: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("KEY_HASH_SECRET is not the secret this database's keys are hashed with");
    noStack(refused.stderr);
    expect((await pool.query("SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1", [org])).rows[0].n).toBe(keysBefore);
    const json = await exportctl(["--json", "keys", "issue", "--org", org, "--description", "x"], { KEY_HASH_SECRET: wrong });
    expect(JSON.parse(json.stderr)).toMatchObject({ error: "KEY_HASH_SECRET_MISMATCH" });
    // Other suites of this run issue keys through the CLI with their own secret: leave no verifier of ours behind.
    if (right) await pool.query("DELETE FROM key_hash_secret_verifier");
  }, CHILD_PROCESS_TIMEOUT);

  test("a database that does not exist: a message naming it and exit 1", async () => {
    const name = `no_such_db_${randomBytes(4).toString("hex")}`;
    const r = await exportctl(["org", "list"], { DATABASE_URL: withDatabase(name) });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`database '${name}' does not exist`);
    noStack(r.stderr);
    const keys = await exportctl(["--json", "keys", "list"], { DATABASE_URL: withDatabase(name) });
    expect(keys.code).toBe(1);
    expect(JSON.parse(keys.stderr)).toMatchObject({ error: "DATABASE_NOT_FOUND" });
  }, CHILD_PROCESS_TIMEOUT);

  test("an unmigrated database: 'run exportctl migrate' and exit 1, for pool and ORM commands alike; migrate then works", async () => {
    const name = `exportctl_unmigrated_${randomBytes(4).toString("hex")}`;
    await createDatabase(testDatabaseUrl(), name);
    try {
      for (const args of [["org", "list"], ["keys", "list"], ["apply", join(ROOT, "examples", "demo.yaml")], ["org", "delete", randomUUID()]]) {
        const r = await exportctl(args, { DATABASE_URL: withDatabase(name), KEY_HASH_SECRET: "x".repeat(20) });
        expect({ args, code: r.code }).toEqual({ args, code: 1 });
        expect(r.stderr).toMatch(/not migrated .*run: exportctl migrate/);
        noStack(r.stderr);
      }
      const migrated = await exportctl(["migrate"], { DATABASE_URL: withDatabase(name) });
      expect(migrated.code).toBe(0);
      expect((await exportctl(["org", "list"], { DATABASE_URL: withDatabase(name) })).code).toBe(0);
    } finally {
      await dropDatabase(testDatabaseUrl(), name);
    }
  }, CHILD_PROCESS_TIMEOUT);
});

describe("exportctl org delete", () => {
  test("refuses while keys are active, then with --force removes the organization's data, export state, keys and form dataset tables, and no other's", async () => {
    // Two organizations with the full demo data (forms, materialized form datasets, keys).
    const victim = randomUUID();
    const bystander = randomUUID();
    const secret = randomBytes(16).toString("hex");
    for (const organizationId of [victim, bystander]) {
      await seedDemo(pool, { keyHashSecret: secret, organizationId });
      const forms = await pool.query<{ id: string }>("SELECT id::text FROM forms WHERE organization_id = $1", [organizationId]);
      for (const { id } of forms.rows) await buildDataset(pool, organizationId, id);
    }
    const tables = (await pool.query<{ table_name: string }>("SELECT table_name FROM form_ds.dataset_tables WHERE organization_id = $1", [victim])).rows;
    expect(tables.length).toBeGreaterThan(0);
    const countEverywhere = async (organizationId: string) => {
      const columns = await pool.query<{ s: string; t: string }>(
        `SELECT c.table_schema AS s, c.table_name AS t FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
          WHERE c.column_name = 'organization_id' AND t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')`,
      );
      let total = 0;
      for (const { s, t } of columns.rows) total += (await pool.query(`SELECT count(*)::int AS n FROM "${s}"."${t}" WHERE organization_id = $1`, [organizationId])).rows[0].n;
      return total + (await pool.query("SELECT count(*)::int AS n FROM organizations WHERE id = $1", [organizationId])).rows[0].n;
    };
    const bystanderBefore = await countEverywhere(bystander);
    expect(await countEverywhere(victim)).toBeGreaterThan(10);

    const refused = await exportctl(["org", "delete", victim]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/still has \d+ active API key\(s\).*--force.*Nothing was deleted/s);
    expect(await countEverywhere(victim)).toBeGreaterThan(10);

    const deleted = await exportctl(["--json", "org", "delete", victim, "--force"]);
    expect(deleted.code).toBe(0);
    const result = JSON.parse(deleted.stdout);
    expect(result).toMatchObject({ id: victim, droppedTables: tables.length });
    expect(result.activeKeys).toBeGreaterThan(0);
    expect(await countEverywhere(victim)).toBe(0);
    for (const { table_name } of tables) {
      expect((await pool.query("SELECT to_regclass($1) IS NULL AS gone", [table_name])).rows[0].gone).toBe(true);
    }
    // Its per-organization schema goes too; the bystander's stays.
    const schemaOf = (org: string) => `form_ds_${org.replace(/-/g, "")}`;
    const schemas = await pool.query<{ nspname: string }>("SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[])", [[schemaOf(victim), schemaOf(bystander)]]);
    expect(schemas.rows.map((r) => r.nspname)).toEqual([schemaOf(bystander)]);
    expect(await countEverywhere(bystander)).toBe(bystanderBefore);

    const again = await exportctl(["org", "delete", victim]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("does not exist");
  }, CHILD_PROCESS_TIMEOUT);

  test("deletes an organization without keys without --force", async () => {
    const id = randomUUID();
    expect((await exportctl(["org", "create", "--name", "Empty Co", "--id", id])).code).toBe(0);
    const r = await exportctl(["org", "delete", id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`deleted: organization ${id} 'Empty Co'`);
    expect((await pool.query("SELECT 1 FROM organizations WHERE id = $1", [id])).rowCount).toBe(0);
  }, CHILD_PROCESS_TIMEOUT);
});

describe("exportctl apply progress", () => {
  test("prints progress on stderr for a document that takes longer than the threshold, none for a quick one or with --no-progress", async () => {
    // The example document, into an organization of its own (cli.test.ts loads the example's organization).
    const example = readFileSync(join(ROOT, "examples", "demo.yaml"), "utf8");
    const { organization } = parse(example) as { organization: string };
    const org = randomUUID();
    const file = join(tmpdir(), `exportctl-progress-${process.pid}.yaml`);
    writeFileSync(file, example.replaceAll(organization, org));
    expect((await exportctl(["org", "create", "--name", "Progress Bakery", "--id", org])).code).toBe(0);
    const slow = await exportctl(["apply", file], { EXPORTCTL_PROGRESS_AFTER_MS: "0" });
    expect(slow.code).toBe(0);
    expect(slow.stderr).toMatch(/apply \[[^\]]*\] \d+\/\d+ steps \| /);
    expect(slow.stderr).toMatch(/apply \[[^\]]*\] (\d+)\/\1 steps \| done/);
    const quick = await exportctl(["apply", file]);
    expect(quick.code).toBe(0);
    expect(quick.stderr).not.toContain("apply [");
    const off = await exportctl(["apply", file, "--no-progress"], { EXPORTCTL_PROGRESS_AFTER_MS: "0" });
    expect(off.code).toBe(0);
    expect(off.stderr).not.toContain("apply [");
    rmSync(file, { force: true });
  }, CHILD_PROCESS_TIMEOUT);
});
