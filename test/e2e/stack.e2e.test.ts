/**
 * End to end: the four services as separate processes, HTTP to the gateway, the demo organization.
 * Pages every dataset to the end with the cursor loop of docs/contract.md §4 at several limits and checks counts,
 * order, duplicates, the CSV dialect and every value's type against the listing.
 */
import { startE2E, type E2E } from "../support/fixture";
import { parseCsvPage, valueProblem } from "../support/csv";
import { OpenApiValidator } from "../support/openapi";
import { startSqlAudit, tenantTables, tenantViolations, type SqlAudit } from "../support/tenant-sql-audit";

interface ListedColumn { key: string; dataType: string; label?: string }
interface ListedDataset {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: string[];
  columns: ListedColumn[];
  links: { csv: string };
  changeToken: string;
}

describe("end to end over HTTP", () => {
  let e2e: E2E;
  // Every statement the services send during this suite is recorded (issue 15.5; the last test reads it).
  const sqlAudit: SqlAudit = startSqlAudit();
  beforeAll(async () => {
    e2e = await startE2E({ env: sqlAudit.env });
  }, 120_000);
  afterAll(async () => {
    await e2e?.stop();
    sqlAudit.dispose();
  });

  const get = (path: string, headers: Record<string, string> = {}) => e2e.get(path, headers);

  async function listing(): Promise<ListedDataset[]> {
    const res = await get("/v1/datasets");
    expect(res.status).toBe(200);
    return (await res.json()) as ListedDataset[];
  }

  /** The loop of docs/contract.md §4: no cursor, then the last row's _cursor, until a page has fewer rows than the limit. */
  async function pageToEnd(ds: ListedDataset, limit: number) {
    const all: Record<string, string>[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const qs = new URLSearchParams({ limit: String(limit) });
      if (cursor) qs.set("cursor", cursor);
      const res = await get(`${ds.links.csv}?${qs}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`${ds.key} page ${pages}: HTTP ${res.status} ${body.toString()}`);
      expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8");
      expect(res.headers.get("content-length")).toBeNull();
      const page = parseCsvPage(body);
      expect(page.header).toEqual(ds.columns.map((c) => c.key));
      expect(page.raw.includes("\r\n")).toBe(false);
      all.push(...page.rows);
      pages++;
      if (page.rows.length < limit) break;
      cursor = page.rows[page.rows.length - 1]._cursor;
      expect(cursor).toMatch(/^[A-Za-z0-9+/=]+$/);
      if (pages > 10_000) throw new Error("paging did not end");
    }
    return { rows: all, pages };
  }

  it("lists every fixed dataset with _cursor last and links resolvable against the base URL", async () => {
    const datasets = await listing();
    const keys = datasets.map((d) => d.key);
    for (const k of ["resources_suppliers", "resources_customers", "resources_products", "resources_product_categories", "resources_equipment", "resources_chemicals", "resources_employees", "resources_areas", "resources_lots", "resources_recipes", "resources_documents", "deviations"]) {
      expect(keys).toContain(k);
    }
    for (const d of datasets) {
      expect(d.columns[d.columns.length - 1]).toMatchObject({ key: "_cursor", dataType: "text" });
      expect(d.links.csv).toBe(`/v1/datasets/${encodeURIComponent(d.key)}/csv`);
      expect(typeof d.changeToken).toBe("string");
      if (d.key.startsWith("resources_")) expect(d.displayName).toBeUndefined();
      for (const value of Object.values(d)) expect(value).not.toBeNull();
    }
  });

  it("pages every dataset to the end at several limits with identical, ordered, duplicate-free results", async () => {
    const datasets = await listing();
    for (const ds of datasets) {
      const full = await pageToEnd(ds, 5000);
      const keyOf = (r: Record<string, string>) => (r.row_index !== undefined ? `${r.id}/${r.row_index}` : r.id);
      const ids = full.rows.map(keyOf);
      expect(new Set(ids).size).toBe(ids.length);
      // Order: last_modified, id (, row_index). The text forms sort like the instants (fixed width, UTC).
      for (let i = 1; i < full.rows.length; i++) {
        const a = full.rows[i - 1];
        const b = full.rows[i];
        const cmp = a.last_modified.localeCompare(b.last_modified) || a.id.localeCompare(b.id) || Number(a.row_index ?? 0) - Number(b.row_index ?? 0);
        expect(cmp).toBeLessThan(0);
      }
      for (const col of ds.columns) {
        for (const row of full.rows) {
          const problem = valueProblem(col.dataType, row[col.key]);
          if (problem) throw new Error(`${ds.key}.${col.key}: ${problem}`);
        }
      }
      for (const limit of [3, 1]) {
        if (limit === 1 && full.rows.length > 60) continue;
        const small = await pageToEnd(ds, limit);
        expect(small.rows.map(keyOf)).toEqual(ids);
        expect(small.rows.map((r) => r._cursor)).toEqual(full.rows.map((r) => r._cursor));
      }
    }
  }, 180_000);

  it("exports exactly the organization's rows of the fixed datasets", async () => {
    const counts: Array<[string, string]> = [
      ["resources_suppliers", "suppliers"],
      ["resources_products", "products"],
      ["resources_lots", "lots"],
      ["resources_documents", "documents"],
      ["deviations", "deviations"],
    ];
    const datasets = await listing();
    for (const [key, table] of counts) {
      const ds = datasets.find((d) => d.key === key)!;
      const { rows } = await pageToEnd(ds, 5000);
      const expected = Number((await e2e.pool.query(`SELECT count(*) FROM ${table} WHERE organization_id = $1`, [e2e.organizationId])).rows[0].count);
      expect(expected).toBeGreaterThan(0);
      expect(rows.length).toBe(expected);
    }
  });

  it("answers problem+json for a missing key, an unknown dataset and an unknown route", async () => {
    const noKey = await fetch(`${e2e.baseUrl}/v1/datasets`);
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get("content-type")).toContain("application/problem+json");
    const body = (await noKey.json()) as any;
    expect(body.errorCode).toBe("UNAUTHORIZED");
    expect(body.detail).toBeUndefined();
    const missing = await get("/v1/datasets/no_such_dataset/csv");
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).errorCode).toBe("DATASET_NOT_FOUND");
    const route = await get("/v1/nowhere");
    expect(route.status).toBe(404);
    expect(await route.json()).toMatchObject({ errorCode: "NOT_FOUND", title: "Not Found" });
  });

  it("live responses match the OpenAPI document the gateway serves", async () => {
    const openapi = await OpenApiValidator.fetch(e2e.baseUrl);
    const listing = await get("/v1/datasets");
    openapi.validate("/v1/datasets", "get", 200, "application/json", await listing.json());
    const unauthorized = await fetch(`${e2e.baseUrl}/v1/datasets`);
    openapi.validate("/v1/datasets", "get", 401, "application/problem+json", await unauthorized.json());
    const csvPath = "/v1/datasets/{datasetKey}/csv";
    const page = await get("/v1/datasets/deviations/csv?limit=2");
    expect(page.status).toBe(200);
    openapi.validate(csvPath, "get", 200, "text/csv", undefined);
    await page.arrayBuffer();
    const bad = await get("/v1/datasets/deviations/csv?limit=x&after=y");
    openapi.validate(csvPath, "get", 400, "application/problem+json", await bad.json());
    const missing = await get("/v1/datasets/nope/csv");
    openapi.validate(csvPath, "get", 404, "application/problem+json", await missing.json());
    const tampered = await get("/v1/datasets/deviations/csv?cursor=abc");
    const cursorProblem = await tampered.json();
    expect(cursorProblem).toMatchObject({ errorCode: "INVALID_CURSOR", cursorProblem: expect.any(String) });
    openapi.validate(csvPath, "get", 400, "application/problem+json", cursorProblem);
    // The validator itself must reject a body that breaks the schema.
    expect(() => openapi.validate("/v1/datasets", "get", 200, "application/json", [{ key: 1 }])).toThrow(/does not match/);
  });

  it("every instant the API returns is valid for modifiedSince/from/to (strict validator) and accepted when sent back", async () => {
    const openapi = await OpenApiValidator.fetch(e2e.baseUrl);
    const csvPath = "/v1/datasets/{datasetKey}/csv";
    const listing = (await (await get("/v1/datasets")).json()) as Array<{ key: string; columns: Array<{ key: string; dataType: string }> }>;
    let sentBack = 0;
    for (const dataset of listing) {
      const page = parseCsvPage(Buffer.from(await (await get(`/v1/datasets/${dataset.key}/csv?limit=3`)).arrayBuffer()));
      const row = page.rows.at(-1);
      if (!row) continue;
      for (const column of dataset.columns.filter((c) => c.dataType === "dateTime")) {
        if (row[column.key]) for (const name of ["modifiedSince", "from", "to"]) openapi.validateParameter(csvPath, "get", name, row[column.key]);
      }
      const query = new URLSearchParams({ modifiedSince: row.last_modified, after: row.id, limit: "3" });
      if (row.row_index !== undefined) query.set("afterRowIndex", row.row_index);
      const next = await get(`/v1/datasets/${dataset.key}/csv?${query}`);
      expect({ dataset: dataset.key, status: next.status }).toEqual({ dataset: dataset.key, status: 200 });
      await next.arrayBuffer();
      sentBack++;
    }
    expect(sentBack).toBeGreaterThan(3);
  });

  it("streams CSV pages (plain, gzip, abandoned mid-body) without a listener-leak warning from the gateway", async () => {
    for (const encoding of ["identity", "gzip"]) {
      for (let i = 0; i < 3; i++) {
        const res = await e2e.get("/v1/datasets/resources_suppliers/csv?limit=1000", { "accept-encoding": encoding });
        expect(res.status).toBe(200);
        if (i === 0) await res.arrayBuffer();
        else {
          const reader = res.body!.getReader();
          await reader.read();
          await reader.cancel();
        }
      }
    }
    // Node prints the warning on the gateway's stderr as the listener is added; give the pipe a moment.
    await new Promise((r) => setTimeout(r, 500));
    expect(e2e.stack.logs.gateway.join("")).not.toMatch(/MaxListenersExceededWarning/);
  });

  it("sends no statement that reads or writes a tenant table without an organization_id equality (Citus routing)", async () => {
    const statements = sqlAudit.statements();
    // The recorder works: the suite's own traffic (listing and CSV pages of the demo organization) is there.
    expect(statements.some((s) => /\bdataset_registry\b/.test(s.text) && /organization_id\s*=/.test(s.text))).toBe(true);
    expect(statements.some((s) => /^COPY /.test(s.text))).toBe(true);
    const violations = tenantViolations(statements, await tenantTables(e2e.pool), BACKGROUND_FAN_OUT);
    expect([...new Set(violations.map((v) => `${v.app.split("/").slice(-3, -2)[0]}: ${v.text.replace(/\s+/g, " ").slice(0, 160)}`))]).toEqual([]);
  });
});

/**
 * Statements of the services' background work that look at every organization on purpose: claiming
 * the next queued organization or change, the lag gauge, dropping retired tables. Each is listed in
 * docs/scale-out.md ("Statements that do not stay on one node"); a request's statements never are.
 */
const BACKGROUND_FAN_OUT: RegExp[] = [
  /^INSERT INTO registry_sync_queue \(organization_id, requested_at\)\s+SELECT organization_id, clock_timestamp\(\) FROM \(\s*SELECT organization_id FROM export_organizations/, // start-up: fixed definitions changed, queue every organization
  /^SELECT organization_id, form_id FROM form_dataset_changes\s+WHERE kind = 'rebuild'/, // maintenance: claim the next organization's rebuild (round-robin)
  /^SELECT seq, organization_id, form_id, submission_id FROM form_dataset_changes\s+WHERE (organization_id = \(|kind = 'submission')/, // maintenance: claim the next organization's changes
  /^SELECT organization_id, table_name(, form_id)? FROM form_ds\.dataset_tables\s+WHERE (retired_at IS NOT NULL|staged)/, // clean-up: tables past their grace, abandoned staged tables
  /FROM registry_sync_queue\s+WHERE organization_id <> ALL/, // queue worker: claim the oldest queued organization
  /FROM form_dataset_changes\s+WHERE \(\$1::uuid IS NULL OR organization_id = \$1\) ORDER BY seq LIMIT 1/, // maintenance lag gauge
  /^SELECT organization_id, form_id FROM form_dataset_pending_floors\s+WHERE held AND/, // maintenance: pending floors held back, oldest first
  /^WITH doomed AS \(\s*SELECT organization_id, scope, deleted_at, id, seq FROM dataset_tombstones\s+WHERE deleted_at </, // retention: prune tombstones of every organization
  /^WITH doomed AS \(\s*SELECT organization_id, kind, rewritten_at, record_id, seq FROM dataset_rewrite_log\s+WHERE rewritten_at </, // retention: prune rewrite log entries of every organization
  /^SELECT organization_id::text AS organizationId, dataset FROM \(\s*SELECT r\.organization_id, r\.key AS dataset, s\.rendered_at FROM dataset_registry r/, // rendered datasets: the ones behind (renderCandidates)
  /^SELECT organization_id, table_name FROM rendered_dataset_retired_tables WHERE retired_at </, // rendered datasets: retired tables past their grace
];
