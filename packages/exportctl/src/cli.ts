#!/usr/bin/env node
/**
 * exportctl: the operator's tool for organizations, API keys and loading data (docs/exportctl.md).
 * Exit codes: 0 success, 1 operator error (message only), 2 usage error, 3 unexpected failure.
 */
import { Command, CommanderError } from "commander";
import { ConfigError } from "@exportsvc/common";
import { createOrm, createPool, isDatabaseUnavailable, migrate, type MikroORM } from "@exportsvc/db";
import type { Pool } from "pg";
import { applyDocument } from "./apply/apply";
import { readDocumentFile } from "./apply/validate";
import { databaseConfig, keyHashConfig } from "./config";
import { isExportctlError } from "./errors";
import { issueKey, listKeys, revokeKey } from "./keys";
import { createOrganization, listOrganizations, setOrganizationEnabled } from "./organizations";

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

async function withPool<T>(fn: (pool: Pool) => Promise<T>): Promise<T> {
  const { databaseUrl } = databaseConfig();
  const pool = createPool({ connectionString: databaseUrl, max: 2, applicationName: "exportctl" });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

async function withOrm<T>(fn: (orm: MikroORM) => Promise<T>): Promise<T> {
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
      const r = await withOrm((orm) => issueKey(orm, { organizationId: o.org, description: o.description, expiresAt: o.expiresAt, keyHashSecret }));
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

  program
    .command("apply <file>")
    .description("load an apply document (JSON or YAML; '-' reads stdin) in one transaction")
    .action(async (file: string) => {
      const doc = readDocumentFile(file);
      const r = await withPool((pool) => applyDocument(pool, doc));
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
      const applied = await withPool((pool) => migrate(pool));
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
    if (isDatabaseUnavailable(err)) return fail(3, "DATABASE_UNAVAILABLE", `database unavailable: ${(err as Error).message}`);
    return fail(3, "UNEXPECTED", `unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  }
}

if (require.main === module) {
  void main(process.argv).then((code) => {
    process.exitCode = code;
  });
}
