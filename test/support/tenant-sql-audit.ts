import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pool } from "pg";

/**
 * Records every SQL statement the services of a test send (test/support/record-sql.cjs preloaded
 * into them) and finds those that read or write a tenant table without an `organization_id`
 * equality: on a distributed PostgreSQL (Citus, docs/scale-out.md) each of those would fan out to
 * every node instead of being routed to the one holding the organization.
 */
export interface RecordedStatement {
  app: string;
  text: string;
}

export interface SqlAudit {
  /** Environment for the services (NODE_OPTIONS preload + the file to write). */
  env: Record<string, string>;
  statements(): RecordedStatement[];
  dispose(): void;
}

export function startSqlAudit(): SqlAudit {
  const dir = mkdtempSync(join(tmpdir(), "sql-audit-"));
  const file = join(dir, "statements.jsonl");
  const preload = join(__dirname, "record-sql.cjs");
  return {
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${preload}`.trim(), SQL_AUDIT_FILE: file },
    statements: () => {
      let raw = "";
      try {
        raw = readFileSync(file, "utf8");
      } catch {
        return [];
      }
      return raw
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as RecordedStatement);
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Tables with an organization_id that are Citus reference tables in docs/scale-out.md (small, read
 * by key before the organization is known, e.g. the API key by its secret's hash): copied to every
 * node, so reading them never fans out.
 */
export const REFERENCE_TABLES = ["api_keys", "export_organizations"];

/** Every distributed tenant table: an organization_id column and not a reference table. */
export async function tenantTables(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ schema: string; name: string }>(
    `SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('public', 'form_ds')
        AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'organization_id' AND NOT a.attisdropped)`,
  );
  return rows.map((r) => (r.schema === "public" ? r.name : `${r.schema}.${r.name}`)).filter((t) => !REFERENCE_TABLES.includes(t));
}

/**
 * Per-organization form dataset tables (form_ds_<org>.t_…), form_ds.t_… tables from earlier builds,
 * and rendered resource datasets and deviations (form_ds_<org>.rd_…).
 */
const FORM_TABLE = String.raw`form_ds(?:_[0-9a-f]{32})?\.(?:t|rd)_\w+`;

/** `organization_id = $n`, `= '<uuid>'` (COPY has no parameters) or `= <plpgsql argument>`: one organization. */
const ORGANIZATION_EQUALITY = /\borganization_id\s*=\s*(\$\d+|'[0-9a-fA-F-]{36}'|E'[0-9a-fA-F-]{36}'|org\b|\(\s*\$\d+)/i;

/** An INSERT whose organization_id (first column) is one parameter: routed by its value. */
const ROUTED_INSERT = /^\s*INSERT INTO [\w.]+ \(organization_id,[^)]*\)\s*(VALUES \(\$\d+|SELECT \$\d+,)/i;

export interface TenantViolation {
  app: string;
  text: string;
  tables: string[];
}

/** Statements touching a tenant table with no organization equality; `allowed` lists documented exceptions. */
export function tenantViolations(statements: RecordedStatement[], tables: string[], allowed: RegExp[] = []): TenantViolation[] {
  const names = [...tables.map((t) => t.replace(/[.]/g, "\\.")), FORM_TABLE];
  // Row reads and writes (DDL on an organization's own schema runs on that schema's node).
  const reference = new RegExp(String.raw`\b(?:from|join|into|update|using)\s+(?:only\s+)?(?:public\.)?(${names.join("|")})\b`, "gi");
  const out: TenantViolation[] = [];
  for (const s of statements) {
    const text = s.text.replace(/"/g, "");
    const touched = [...text.matchAll(reference)].map((m) => m[1].toLowerCase());
    if (touched.length === 0) continue;
    // An optional filter (`$1 IS NULL OR organization_id = $1`) is no equality: with NULL it reads every organization.
    const required = text.replace(/\$\d+(?:::uuid(?:\[\])?)?\s+IS NULL OR organization_id\s*=\s*(?:ANY\()?\$\d+/gi, "<optional filter>");
    if (ORGANIZATION_EQUALITY.test(required) || ROUTED_INSERT.test(text)) continue;
    if (allowed.some((a) => a.test(text))) continue;
    out.push({ app: s.app, text: s.text, tables: [...new Set(touched)] });
  }
  return out;
}
