/**
 * docs/api.md "Reading the CSV": the Python csv, pandas, DuckDB (@duckdb/node-api) and PostgreSQL
 * COPY incantations, taken from the page as written, run against every dataset of the demo
 * organization. Each must load every row and lose no typed value (a value it cannot type fails it).
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { startE2E, type E2E } from "../support/fixture";
import { parseCsvPage } from "../support/csv";
import { testDatabaseUrl } from "../support/db";
import { waitFor, type ListedDataset } from "../support/forms";

const run = promisify(execFile);
const DOC = readFileSync(join(__dirname, "..", "..", "docs", "api.md"), "utf8");
const DEMO_FORM_KEYS = ["supplier_audit", "supplier_audit__findings", "supplier_audit__findings__actions", "temperature_check"];

/** The code block that follows `<!-- reading-csv:<name> -->` in docs/api.md. */
function snippet(name: string): string {
  const m = new RegExp(`<!-- reading-csv:${name} -->\\s*\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``).exec(DOC);
  if (!m) throw new Error(`docs/api.md has no reading-csv:${name} block`);
  return m[1];
}

const DUCKDB_TYPES: Record<string, string> = {
  text: "VARCHAR", number: "DOUBLE", boolean: "BOOLEAN", dateTime: "TIMESTAMPTZ", localDateTime: "TIMESTAMP", date: "DATE", uuid: "UUID",
};
const POSTGRES_TYPES: Record<string, string> = {
  text: "text", number: "numeric", boolean: "boolean", dateTime: "timestamptz", localDateTime: "timestamp", date: "date", uuid: "uuid",
};

/** A Python interpreter with pandas, if one is installed (Debian's python3-pandas is for /usr/bin/python3). */
function pythonWithPandas(): string | undefined {
  for (const python of ["python3", "/usr/bin/python3"]) {
    if (spawnSync(python, ["-c", "import pandas"]).status === 0) return python;
  }
  return undefined;
}

interface Page {
  dataset: ListedDataset;
  file: string;
  header: string[];
  rows: Record<string, string>[];
  types: Record<string, string>;
}

describe("docs/api.md 'Reading the CSV', run against every demo dataset", () => {
  let e2e: E2E;
  let dir: string;
  let pages: Page[] = [];

  beforeAll(async () => {
    e2e = await startE2E();
    const listing = await waitFor("the demo organization's form datasets", async () => {
      const body = (await (await e2e.get("/v1/datasets")).json()) as ListedDataset[];
      return DEMO_FORM_KEYS.every((k) => body.some((d) => d.key === k)) ? body : undefined;
    });
    dir = mkdtempSync(join(tmpdir(), "reading-csv-"));
    for (const dataset of listing) {
      const res = await e2e.get(`/v1/datasets/${dataset.key}/csv?limit=5000`);
      expect(res.status).toBe(200);
      const body = Buffer.from(await res.arrayBuffer());
      const page = parseCsvPage(body);
      expect(page.rows.length).toBeLessThan(5000); // one page holds the whole demo dataset
      const file = join(dir, `${dataset.key}.csv`);
      writeFileSync(file, body);
      const types = Object.fromEntries(dataset.columns.map((c) => [c.key, c.dataType]));
      pages.push({ dataset, file, header: page.header, rows: page.rows, types });
    }
    expect(pages.length).toBeGreaterThan(10);
    pages.push(syntheticPage(dir));
  }, 180_000);
  afterAll(async () => {
    await e2e?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Per typed column, how many cells are not empty in the CSV: a reader must type exactly these. */
  const filled = (page: Page, key: string) => page.rows.filter((r) => r[key] !== "").length;

  it("Python csv (utf-8-sig, raised field size): every row, headers without the BOM", async () => {
    const code = `${snippet("python").replaceAll('"page.csv"', "sys.argv[1]")}\nimport json, sys\nprint(json.dumps({"rows": len(rows), "header": list(rows[0].keys()) if rows else []}))\n`;
    const script = join(dir, "read.py");
    writeFileSync(script, `import sys\n${code}`);
    for (const page of pages) {
      const { stdout } = await run("python3", [script, page.file], { maxBuffer: 64 * 1024 * 1024 });
      const out = JSON.parse(stdout);
      expect({ dataset: page.dataset.key, rows: out.rows }).toEqual({ dataset: page.dataset.key, rows: page.rows.length });
      if (page.rows.length > 0) expect(out.header).toEqual(page.header);
    }
  }, 120_000);

  it("pandas (python3-pandas): every row, typed columns converted with no value lost", async () => {
    const python = pythonWithPandas();
    if (!python) {
      throw new Error("COULD NOT RUN: no python3 with pandas. Install Debian's python3-pandas (apt-get install python3-pandas; .ci/run does).");
    }
    const script = join(dir, "read_pandas.py");
    writeFileSync(
      script,
      [
        "import json, sys",
        "types = json.loads(sys.argv[2])",
        snippet("pandas").replaceAll('"page.csv"', "sys.argv[1]"),
        'print(json.dumps({"rows": len(df), "notnull": {k: int(df[k].notna().sum()) for k in df.columns}}))',
      ].join("\n"),
    );
    for (const page of pages) {
      const { stdout } = await run(python, [script, page.file, JSON.stringify(page.types)], { maxBuffer: 64 * 1024 * 1024 });
      const out = JSON.parse(stdout) as { rows: number; notnull: Record<string, number> };
      expect({ dataset: page.dataset.key, rows: out.rows }).toEqual({ dataset: page.dataset.key, rows: page.rows.length });
      for (const key of page.header) {
        expect({ dataset: page.dataset.key, key, values: out.notnull[key] }).toEqual({ dataset: page.dataset.key, key, values: filled(page, key) });
      }
    }
  }, 120_000);

  describe("DuckDB (@duckdb/node-api)", () => {
    let duck: DuckDBConnection;
    beforeAll(async () => {
      duck = await (await DuckDBInstance.create(":memory:")).connect();
    });
    afterAll(() => duck?.closeSync());

    it("types from the listing: every row, every non-empty cell typed, empty cells null, quoted empty strings kept", async () => {
      const template = snippet("duckdb");
      expect(template).toContain("columns = {");
      for (const page of pages) {
        const columns = page.header.map((key) => `'${key}': '${DUCKDB_TYPES[page.types[key]] ?? "VARCHAR"}'`).join(", ");
        const sql = template
          .replace("'page.csv'", `'${page.file}'`)
          .replace(/columns = \{[^}]*\}/, `columns = {${columns}}`)
          .replace(/;\s*$/, "");
        const counts = page.header.map((key, i) => `count("${key}") AS c${i}`).join(", ");
        const result = await duck.runAndReadAll(`SELECT count(*) AS n, ${counts} FROM (${sql})`);
        const [row] = result.getRowObjectsJson() as Array<Record<string, string | number>>;
        expect({ dataset: page.dataset.key, rows: Number(row.n) }).toEqual({ dataset: page.dataset.key, rows: page.rows.length });
        page.header.forEach((key, i) => {
          const quotedEmpty = page.types[key] === "text" || page.types[key] === undefined ? emptyStrings(page, key) : 0;
          expect({ dataset: page.dataset.key, key, values: Number(row[`c${i}`]) }).toEqual({ dataset: page.dataset.key, key, values: filled(page, key) + quotedEmpty });
        });
      }
    }, 120_000);
  });

  it("PostgreSQL COPY with HEADER MATCH after stripping the BOM (the shell lines as written, through psql)", async () => {
    const { Client } = await import("pg");
    const client = new Client({ connectionString: testDatabaseUrl() });
    await client.connect();
    const schema = `reading_csv_${process.pid}`;
    try {
      await client.query(`CREATE SCHEMA ${schema}`);
      for (const page of pages) {
        const table = `${schema}.t_${pages.indexOf(page)}`;
        const columns = page.dataset.columns.map((c) => `"${c.key}" ${POSTGRES_TYPES[c.dataType] ?? "text"}`).join(", ");
        await client.query(`CREATE TABLE ${table} (${columns})`);
        const shell = snippet("postgresql").replaceAll("page.csv", page.file).replaceAll("staging_suppliers", table);
        await run("bash", ["-c", `set -euo pipefail\n${shell}`], { env: { ...process.env, DATABASE_URL: testDatabaseUrl() } });
        const counts = page.header.map((key, i) => `count("${key}") AS c${i}`).join(", ");
        const { rows } = await client.query(`SELECT count(*)::int AS n, ${counts} FROM ${table}`);
        expect({ dataset: page.dataset.key, rows: rows[0].n }).toEqual({ dataset: page.dataset.key, rows: page.rows.length });
        page.header.forEach((key, i) => {
          expect({ dataset: page.dataset.key, key, values: Number(rows[0][`c${i}`]) }).toEqual({
            dataset: page.dataset.key,
            key,
            values: filled(page, key) + emptyStrings(page, key),
          });
        });
      }
    } finally {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    }
  }, 180_000);

  it("(why) HEADER MATCH refuses the page with its BOM", async () => {
    const page = pages.find((p) => p.rows.length > 0)!;
    const { Client } = await import("pg");
    const client = new Client({ connectionString: testDatabaseUrl() });
    await client.connect();
    const table = `reading_csv_bom_${process.pid}`;
    try {
      await client.query(`CREATE TABLE ${table} (${page.dataset.columns.map((c) => `"${c.key}" text`).join(", ")})`);
      const columns = page.header.map((h) => `"${h}"`).join(",");
      const result = await run("bash", ["-c", `psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -c "\\copy ${table} (${columns.replaceAll('"', '\\"')}) FROM '${page.file}' (FORMAT csv, HEADER MATCH)"`], {
        env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
      }).catch((e: { stderr: string }) => e);
      expect((result as { stderr: string }).stderr).toMatch(/column name mismatch in header line field 1/);
    } finally {
      await client.query(`DROP TABLE IF EXISTS ${table}`);
      await client.end();
    }
  }, 60_000);
});

/**
 * What the demo data may lack, in the API's dialect: an empty string ("") beside a null (empty
 * field), a quoted comma, quote and newline, and a 3-million-character field (a large reference
 * field: above Python's 131072 and DuckDB's 2 MB defaults).
 */
function syntheticPage(dir: string): Page {
  const columns = [
    { key: "id", dataType: "uuid" },
    { key: "last_modified", dataType: "dateTime" },
    { key: "note", dataType: "text" },
    { key: "amount", dataType: "number" },
    { key: "done", dataType: "boolean" },
    { key: "day", dataType: "date" },
    { key: "_cursor", dataType: "text" },
  ];
  const big = `"${"{\"\"k\"\": 1}".repeat(1)}${"x".repeat(3_000_000)}"`;
  const text = [
    columns.map((c) => c.key).join(","),
    `0b6f2c5e-0000-4000-8000-000000000001,2024-05-01 12:30:00.123456+00,"",1.5,t,2024-05-01,"AQ+/="`,
    `0b6f2c5e-0000-4000-8000-000000000002,2024-05-01 12:30:00+00,,,,,"AQ+/x"`,
    `0b6f2c5e-0000-4000-8000-000000000003,2024-05-02 00:00:00+00,"a, ""quoted""\nline",-2,f,2024-02-29,"AQ/="`,
    `0b6f2c5e-0000-4000-8000-000000000004,2024-05-03 00:00:00+00,${big},0,t,2024-05-03,"AQ=="`,
  ].join("\n") + "\n";
  const file = join(dir, "synthetic.csv");
  writeFileSync(file, `\ufeff${text}`);
  const parsed = parseCsvPage(readFileSync(file));
  const dataset = { key: "synthetic", childDatasets: [], columns, links: { csv: "" }, changeToken: "" } as unknown as ListedDataset;
  return { dataset, file, header: parsed.header, rows: parsed.rows, types: Object.fromEntries(columns.map((c) => [c.key, c.dataType])) };
}

/** Cells written as "" (an empty string, not null): values for readers that keep the two apart. */
function emptyStrings(page: Page, key: string): number {
  return countQuotedEmpty(readFileSync(page.file, "utf8").replace(/^\ufeff/, ""), page.header.indexOf(key));
}

/** Counts records whose field at `index` is written `""`, with a small RFC 4180 scanner. */
function countQuotedEmpty(text: string, index: number): number {
  let count = 0;
  let field = 0;
  let i = 0;
  let header = true;
  while (i < text.length) {
    let quotedEmpty = false;
    if (text[i] === '"') {
      const start = i;
      i++;
      for (;;) {
        if (text[i] === '"' && text[i + 1] === '"') i += 2;
        else if (text[i] === '"') break;
        else i++;
      }
      i++;
      quotedEmpty = i - start === 2;
    } else {
      while (i < text.length && text[i] !== "," && text[i] !== "\n") i++;
    }
    if (!header && field === index && quotedEmpty) count++;
    if (text[i] === ",") {
      field++;
      i++;
    } else if (text[i] === "\n") {
      field = 0;
      header = false;
      i++;
    }
  }
  return count;
}
