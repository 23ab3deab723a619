#!/usr/bin/env node
/**
 * exportctl: the operator's tool for organizations, API keys and loading data (docs/exportctl.md).
 * Exit codes: 0 success, 1 operator error (message only), 2 usage error, 3 unexpected failure.
 */
import { Command, CommanderError } from "commander";
import { ConfigError } from "@exportsvc/common";
import { createOrm, createPool, isDatabaseUnavailable, migrate, pendingMigrations, type MikroORM } from "@exportsvc/db";
import type { Pool } from "pg";
import { applyDocument } from "./apply/apply";
import { applyProgress } from "./progress";
import { describeDatabaseFailure } from "./database-errors";
import { readDocumentFile } from "./apply/validate";
import { databaseConfig, keyHashConfig } from "./config";
import { ExportctlError, isExportctlError } from "./errors";
import { checkKeyHashSecret, issueKey, listKeys, revokeKey } from "./keys";
import { requestFormRebuilds } from "./forms";
import { createOrganization, deleteOrganization, listOrganizations, setOrganizationEnabled } from "./organizations";

interface GlobalOptions {
  json?: boolean;
}

const out = (text: string) => process.stdout.write(`${text}\n`);

function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cells = rows.map((r) => columns.map((c) => (r[c] === null || r[c] === undefined ? "-" : String(r[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join("  ").trimEnd();
  return [line(columns), ...cells.map(line)].join("\n");
}

/** Refuses to work on a database this exportctl's migrations have not all been applied to. */
async function requireMigrated(pool: Pool): Promise<void> {
  const pending = await pendingMigrations(pool);
  if (pending.length === 0) return;
  throw new ExportctlError(
    "DATABASE_NOT_MIGRATED",
    `the database in DATABASE_URL is not migrated (${pending.length} migration(s) pending, first ${pending[0]}); run: exportctl migrate`,
  );
}

async function withPool<T>(fn: (pool: Pool) => Promise<T>, opts: { migrated?: boolean } = {}): Promise<T> {
  const { databaseUrl } = databaseConfig();
  const pool = createPool({ connectionString: databaseUrl, max: 2, applicationName: "exportctl" });
  try {
    if (opts.migrated !== false) await requireMigrated(pool);
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

async function withOrm<T>(fn: (orm: MikroORM) => Promise<T>): Promise<T> {
  // The schema check on a plain pool first: connection and migration problems get the same messages.
  await withPool(async () => undefined);
  const { databaseUrl } = databaseConfig();
  const orm = await createOrm(databaseUrl, 2);
  try {
    return await fn(orm);
  } finally {
    await orm.close(true);
  }
}

export function buildProgram(): Command {
  const program = new Command("exportctl")
    .description("Operate the dataset export service: organizations, API keys, data loading, migrations")
    .option("--json", "machine-readable JSON output")
    .showHelpAfterError()
    .exitOverride();
  const json = () => (program.opts() as GlobalOptions).json === true;
  const print = (value: unknown, human: () => string) => out(json() ? JSON.stringify(value, null, 2) : human());

  const org = program.command("org").description("manage organizations");
  org
    .command("create")
    .description("create an organization (source row + export settings)")
    .requiredOption("--name <name>", "organization name")
    .option("--id <uuid>", "organization id (default: a new random uuid)")
    .option("--enable", "enable export right away", false)
    .action(async (o: { name: string; id?: string; enable: boolean }) => {
      const r = await withPool((pool) => createOrganization(pool, o));
      print(r, () => `${r.created ? "created" : "exists"}: organization ${r.id} '${r.name}' (export ${r.exportEnabled ? "enabled" : "disabled"})`);
    });
  for (const [name, enabled] of [["enable", true], ["disable", false]] as const) {
    org
      .command(`${name} <id>`)
      .description(`${name} export for an organization`)
      .action(async (id: string) => {
        const r = await withPool((pool) => setOrganizationEnabled(pool, id, enabled));
        print(r, () => `organization ${r.id}: export ${enabled ? "enabled" : "disabled"}${r.changed ? "" : " (unchanged)"}`);
      });
  }
  org
    .command("delete <id>")
    .description("delete an organization with its data, export state and API keys, in one transaction")
    .option("--force", "delete even while it has active API keys", false)
    .action(async (id: string, o: { force: boolean }) => {
      const r = await withPool((pool) => deleteOrganization(pool, { id, force: o.force }));
      print(r, () => {
        const rows = Object.entries(r.deletedRows).map(([table, count]) => ({ table, deleted: count }));
        return [
          `deleted: organization ${r.id} '${r.name}' with its source data, ${r.droppedTables} form dataset table(s)` +
            (r.activeKeys > 0 ? ` and ${r.activeKeys} active API key(s) (--force)` : ""),
          table(rows, ["table", "deleted"]),
        ].join("\n");
      });
    });
  org
    .command("list")
    .description("list organizations")
    .action(async () => {
      const rows = await withPool(listOrganizations);
      print(rows, () => table(rows as unknown as Record<string, unknown>[], ["id", "name", "exportEnabled", "activeKeys", "createdAt"]));
    });

  const keys = program.command("keys").description("manage API keys");
  keys
    .command("issue")
    .description("issue an API key (the secret is printed once)")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--description <text>", "who or what the key is for")
    .option("--expires-at <iso>", "expiry (ISO 8601), default: never")
    .action(async (o: { org: string; description: string; expiresAt?: string }) => {
      const { keyHashSecret } = keyHashConfig();
      const r = await withOrm(async (orm) => {
        await checkKeyHashSecret(orm, keyHashSecret);
        return issueKey(orm, { organizationId: o.org, description: o.description, expiresAt: o.expiresAt, keyHashSecret });
      });
      print(r, () =>
        [
          `key id:  ${r.keyId}`,
          `secret:  ${r.secret}`,
          `org:     ${r.organizationId}`,
          `expires: ${r.expiresAt ?? "never"}`,
          ...(r.organizationExportEnabled ? [] : ["", `note: export is disabled for this organization; the key answers 404 until: exportctl org enable ${r.organizationId}`]),
          "",
          "The secret is shown only now; store it safely (it cannot be recovered, only revoked and reissued).",
        ].join("\n"),
      );
    });
  keys
    .command("list")
    .description("list API keys (never their secrets)")
    .option("--org <id>", "only this organization's keys")
    .action(async (o: { org?: string }) => {
      const rows = await withOrm((orm) => listKeys(orm, { organizationId: o.org }));
      print(rows, () => table(rows as unknown as Record<string, unknown>[], ["keyId", "organizationId", "state", "description", "createdAt", "expiresAt", "revokedAt"]));
    });
  keys
    .command("revoke <keyId>")
    .description("revoke an API key (takes effect within about a minute)")
    .action(async (keyId: string) => {
      const r = await withOrm((orm) => revokeKey(orm, keyId));
      print(r, () => `key ${r.keyId}: revoked${r.changed ? "" : " (already revoked)"} at ${r.revokedAt}`);
    });

  const forms = program.command("forms").description("form datasets");
  forms
    .command("rebuild")
    .description("queue a rebuild of form datasets (the schema service runs it): after a cursor key left CURSOR_KEYS, or to retry a failed dataset")
    .option("--org <id>", "this organization's forms")
    .option("--form <id...>", "only these forms of --org")
    .option("--all", "every organization's forms", false)
    .action(async (o: { org?: string; form?: string[]; all: boolean }) => {
      const r = await withPool((pool) => requestFormRebuilds(pool, { organizationId: o.org, formIds: o.form, all: o.all }));
      const count = Object.values(r.forms).reduce((n, ids) => n + ids.length, 0);
      print(r, () =>
        count === 0
          ? "no published form to rebuild"
          : `queued rebuilds of ${count} form(s) in ${r.organizations} organization(s); the schema service runs them (dataset_maintenance_lag_seconds shows the queue)`,
      );
    });

  program
    .command("apply <file>")
    .description("load an apply document (JSON or YAML; '-' reads stdin) in one transaction")
    .option("--no-progress", "no progress output on stderr (shown when a document takes more than a second)")
    .action(async (file: string, o: { progress: boolean }) => {
      const doc = readDocumentFile(file);
      const progress = o.progress && !json() ? applyProgress(process.stderr) : undefined;
      const r = await withPool((pool) => applyDocument(pool, doc, { onProgress: progress?.update })).finally(() => progress?.stop());
      print(r, () => {
        const rows = Object.entries(r.sections)
          .filter(([, s]) => s.inserted + s.updated + s.unchanged + s.deleted > 0)
          .map(([section, s]) => ({ section, ...s }));
        return `applied to organization ${r.organizationId}\n${table(rows, ["section", "inserted", "updated", "unchanged", "deleted"])}`;
      });
    });

  program
    .command("migrate")
    .description("apply pending database migrations")
    .action(async () => {
      const applied = await withPool((pool) => migrate(pool), { migrated: false });
      print({ applied }, () => (applied.length === 0 ? "database is up to date" : applied.map((m) => `applied ${m}`).join("\n")));
    });

  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const jsonErrors = () => (program.opts() as GlobalOptions).json === true;
  const fail = (code: number, error: string, message: string, problems: string[] = []) => {
    process.stderr.write(jsonErrors() ? `${JSON.stringify({ error, message, problems })}\n` : `exportctl: ${message}\n`);
    return code;
  };
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; usage errors were already printed by commander.
      return err.exitCode === 0 ? 0 : 2;
    }
    if (err instanceof ConfigError) return fail(1, "CONFIGURATION", err.message, err.problems);
    if (isExportctlError(err)) return fail(1, err.code, err.message, err.problems);
    const database = describeDatabaseFailure(err);
    if (database) return fail(1, database.code, database.message);
    if (isDatabaseUnavailable(err)) return fail(3, "DATABASE_UNAVAILABLE", `database unavailable: ${(err as Error).message}`);
    return fail(3, "UNEXPECTED", `unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  }
}

if (require.main === module) {
  void main(process.argv).then((code) => {
    process.exitCode = code;
  });
}
