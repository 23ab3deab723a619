import { randomUUID } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { to as copyTo } from "pg-copy-streams";
import {
  buildPageQuery,
  buildRenderedPageQuery,
  CursorCodec,
  CursorKeyring,
  loadRegistryEntry,
  isRenderedPlanStale,
  loadRenderedPlan,
  RENDERED_PAGE_COPY_FORMAT,
  RENDERED_PLAN_STALE_SQLSTATE,
  renderedPageStatement,
  rowsBinding,
  servesRendered,
  type CursorPosition,
  type PageDataset,
  type PageRequest,
  type RenderedPageShape,
  type RenderedPageSource,
} from "@exportsvc/datasets";
import { CopyTextUnescaper } from "@exportsvc/db";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { DEFAULT_SYNCERS, syncOrganization } from "../src";
import { dropRetiredRenderedTables, renderCandidates, renderDataset } from "../src/maintenance/rendered-datasets";
import { addAttribute } from "./support";

/*
 * Rendered datasets (migration 130): a page read from the rendered table is byte for byte the live
 * page, and a page never reads a table that is behind its sources (it reads it patched, or live).
 */

const codec = new CursorCodec({ keyring: CursorKeyring.parse("1:0123456789abcdef0123456789abcdef") });

/** A page's bytes as the export service sends them: CSV COPY, or (rendered pages) text COPY unescaped. */
async function copyText(pool: Pool | PoolClient, select: string, format: "csv" | "text" = "csv"): Promise<string> {
  const client = "release" in pool ? pool : await pool.connect();
  try {
    const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT ${format})`));
    const unescaper = format === "text" ? new CopyTextUnescaper() : undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(unescaper ? unescaper.push(chunk) : chunk);
    unescaper?.end();
    return Buffer.concat(chunks).toString("utf8");
  } finally {
    if (client !== pool) client.release();
  }
}

/**
 * One page as the export service reads it: its plan read first, then the statement it calls for
 * COPYed, planned again while that statement's guard finds the plan stale (a render or a write in between).
 */
async function renderedPage(pool: Pool, dataset: PageDataset, request: PageRequest): Promise<{ page: string; source: RenderedPageSource }> {
  for (;;) {
    const statement = renderedPageStatement(await loadRenderedPlan(pool, request.organizationId, dataset), dataset, request, codec);
    try {
      return { page: await copyText(pool, statement.select, statement.format), source: statement.source };
    } catch (err) {
      if (!isRenderedPlanStale(err)) throw err;
    }
  }
}

/** The position of a page's last record: its `_cursor`, the record's last field, checked against the dataset. */
function lastPosition(page: string, binding: { organizationId: string; datasetKey: string; rowShape: string }): CursorPosition {
  const lines = page.trimEnd().split("\n");
  const parsed = codec.parse(lines[lines.length - 1].split(",").pop()!);
  if (!parsed.ok || !codec.verify(parsed.cursor, binding)) throw new Error("the page's last record has no valid _cursor");
  return parsed.cursor.position;
}

describe("rendered datasets", () => {
  let pool: Pool;
  let org: string;
  const key = "resources_suppliers";
  let dataset: PageDataset;
  const products: string[] = [];

  beforeAll(async () => {
    pool = testPool();
    org = await createTestOrganization(pool);
    const attr = await addAttribute(pool, org, { kind: "suppliers", key: "volume", type: "Number" });
    for (let i = 0; i < 3; i++) {
      const id = randomUUID();
      products.push(id);
      await pool.query("INSERT INTO products (organization_id, id, name) VALUES ($1, $2, $3)", [org, id, `Product ${i}`]);
    }
    await pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description, attributes, last_modified)
       SELECT $1, gen_random_uuid(), 'Supplier ' || g,
              CASE g % 7 WHEN 0 THEN 'with "quotes", commas' || chr(10) || 'and lines' || chr(13) WHEN 1 THEN 'back\slash' || chr(9) || 'tab' || chr(8) || chr(11) || chr(12)
                         WHEN 2 THEN '' WHEN 3 THEN 'ünïcödé ✓ \n' END,
              jsonb_build_object($2::text, (g * 1.5)::text), now() - (g || ' seconds')::interval
         FROM generate_series(1, 120) g`,
      [org, attr],
    );
    await pool.query(
      "INSERT INTO supplier_products (organization_id, supplier_id, product_id) SELECT $1, s.id, $2 FROM suppliers s WHERE s.organization_id = $1 AND s.name LIKE '%3'",
      [org, products[0]],
    );
    await syncOrganization(pool, org, DEFAULT_SYNCERS);
    dataset = (await loadRegistryEntry(pool, org, key))!;
  });

  afterAll(async () => {
    await pool.end();
  });

  const render = () => renderDataset(pool, org, key, { codec, minRows: 0 });
  const livePages = async (limit: number, visibleBeforeMicros?: bigint) => {
    const pages: string[] = [];
    let after: CursorPosition | undefined;
    for (;;) {
      const page = await copyText(pool, buildPageQuery(dataset, { organizationId: org, limit, after, visibleBeforeMicros }, codec));
      if (!page) return pages;
      pages.push(page);
      after = positionOf(page);
    }
  };
  const positionOf = (page: string): CursorPosition => lastPosition(page, rowsBinding(org, dataset));
  /**
   * The pages as the export reads them now, each in its own snapshot (renderedPage: from the rendered
   * table, patched, or live, as its state says), or all by the statement `shape` names.
   */
  const pagesNow = async (limit: number, shape?: RenderedPageShape) => {
    const plan = await loadRenderedPlan(pool, org, dataset);
    if (!plan || !servesRendered(dataset, plan.state)) throw new Error("no rendered table");
    const state = plan.state;
    const pages: string[] = [];
    const sources = new Set<RenderedPageSource>();
    let after: CursorPosition | undefined;
    for (;;) {
      const request = { organizationId: org, limit, after };
      const read = shape ? { page: await copyText(pool, buildRenderedPageQuery(dataset, state, request, codec, shape), RENDERED_PAGE_COPY_FORMAT), source: shape } : await renderedPage(pool, dataset, request);
      if (!read.page) return { pages, current: plan.current, patchable: plan.patchable, state, sources: [...sources].sort() };
      pages.push(read.page);
      sources.add(read.source);
      after = positionOf(read.page);
    }
  };

  it("renders every row; pages from the table equal the live pages byte for byte", async () => {
    const result = await render();
    expect(result.outcome).toBe("built");
    expect(result.rows).toBe(120);
    const { pages, current, sources } = await pagesNow(50);
    expect(current).toBe(true);
    expect(sources).toEqual(["table"]);
    expect(pages).toHaveLength(3);
    expect(pages).toEqual(await livePages(50));
    expect((await render()).outcome).toBe("current");
  });

  it("serves the table's text while it is current (a cell changed behind its back shows)", async () => {
    const plan = (await loadRenderedPlan(pool, org, dataset))!;
    const table = plan.state.tableName!;
    await pool.query(`UPDATE ${table} SET line = replace(line, ',Supplier 1,', ',from the table,') WHERE line LIKE '%,Supplier 1,%'`);
    const now = await pagesNow(500);
    expect(now.current).toBe(true);
    expect(now.pages.join("")).toContain("from the table");
  });

  it("once source rows are written, pages take the rows the table has at their last_modified from it and render the changed and new rows live", async () => {
    const table = (await loadRenderedPlan(pool, org, dataset))!.state.tableName!;
    await pool.query("UPDATE suppliers SET description = 'Changed', last_modified = clock_timestamp() WHERE organization_id = $1 AND name = 'Supplier 2'", [org]);
    await pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description, last_modified) VALUES ($1, gen_random_uuid(), 'Supplier new', 'a "new", one', now() - interval '30 seconds')`,
      [org],
    );
    // The hand-changed cell still shows (its row is unchanged, taken from the table); everything else is the live bytes.
    const unmark = (pages: string[]) => pages.map((page) => page.replace(",from the table,", ",Supplier 1,"));
    for (const limit of [500, 50, 7]) {
      const after = await pagesNow(limit);
      expect(after).toMatchObject({ current: false, patchable: true, sources: ["patched"] });
      const text = after.pages.join("");
      expect(text).toContain("from the table");
      expect(text).toContain(",Supplier 2,Changed,");
      expect(text).toContain('Supplier new,"a ""new"", one"');
      expect(unmark(after.pages)).toEqual(await livePages(limit));
    }
    // The update renders the changed and the new row (and only them, beside the cell changed by hand: same last_modified, kept).
    const updated = await render();
    expect(updated.outcome).toBe("updated");
    expect(updated.rows).toBe(2);
    await pool.query(`UPDATE ${table} SET line = replace(line, ',from the table,', ',Supplier 1,')`);
    const again = await pagesNow(50);
    expect(again.current).toBe(true);
    expect(again.pages).toEqual(await livePages(50));
  });

  it("pages exactly as live when more rows were written than a page reads from the table (its stale rows crowd the window)", async () => {
    // The 40 oldest suppliers move to the end: the table's first rows are all stale.
    await pool.query(
      `UPDATE suppliers SET description = 'moved ' || name, last_modified = clock_timestamp()
        WHERE organization_id = $1 AND id IN (SELECT id FROM suppliers WHERE organization_id = $1 ORDER BY last_modified, id LIMIT 40)`,
      [org],
    );
    for (const limit of [3, 60]) {
      const now = await pagesNow(limit);
      expect(now).toMatchObject({ current: false, patchable: true });
      expect(now.pages).toEqual(await livePages(limit));
      expect(now.pages.join("").match(/,moved Supplier/g)).toHaveLength(40);
    }
    expect(await render()).toMatchObject({ outcome: "updated", rows: 40 });
    const current = await pagesNow(50);
    expect(current.current).toBe(true);
    // The patched statement on a current table: nothing to patch, the same bytes.
    expect((await pagesNow(50, "patched")).pages).toEqual(current.pages);
    expect(current.pages).toEqual(await livePages(50));
  });

  it("deleted rows leave the table on the next render; until then pages read live", async () => {
    await pool.query("DELETE FROM suppliers WHERE organization_id = $1 AND name IN ('Supplier 5', 'Supplier 6')", [org]);
    expect(await pagesNow(50)).toMatchObject({ current: false, patchable: false, sources: ["live"] });
    expect((await pagesNow(50)).pages).toEqual(await livePages(50));
    // A deleted supplier is a named record (other suppliers' parent_names show it): a rewrite entry, so a new table.
    const rebuilt = await render();
    expect(rebuilt).toMatchObject({ outcome: "built", rows: 119 });
    const { pages, current } = await pagesNow(50);
    expect(current).toBe(true);
    expect(pages).toEqual(await livePages(50));
    expect(pages.join("")).not.toContain("Supplier 5,");
  });

  it("a renamed product shown by supplier rows (a rewrite entry) makes pages read live until a new table is built", async () => {
    await pool.query("UPDATE products SET name = 'Product zero, renamed' WHERE organization_id = $1 AND id = $2", [org, products[0]]);
    const stale = await pagesNow(50);
    expect(stale).toMatchObject({ current: false, patchable: false, sources: ["live"] });
    expect(stale.pages.join("")).toContain("Product zero, renamed");
    const rebuilt = await render();
    expect(rebuilt.outcome).toBe("built");
    const { pages, current, state } = await pagesNow(50);
    expect(current).toBe(true);
    expect(state.tableName).not.toBe(stale.state.tableName);
    expect(pages).toEqual(await livePages(50));
    expect(pages.join("")).toContain("Product zero, renamed");
    // The old table stays for pages planned against it a moment before, then goes.
    expect((await pool.query("SELECT to_regclass($1) AS t", [stale.state.tableName])).rows[0].t).not.toBeNull();
    await dropRetiredRenderedTables(pool, 0);
    expect((await pool.query("SELECT to_regclass($1) AS t", [stale.state.tableName])).rows[0].t).toBeNull();
  });

  it("a page planned before a rename and a new table committed is refused by its own statement, before any row; planned again it shows the rename", async () => {
    const request = { organizationId: org, limit: 500 };
    const planned = renderedPageStatement(await loadRenderedPlan(pool, org, dataset), dataset, request, codec);
    expect(planned.source).toBe("table");
    // Committed after the plan was read: a rename its rows show, and the table that replaces this one.
    await pool.query("UPDATE products SET name = 'Product zero again' WHERE organization_id = $1 AND id = $2", [org, products[0]]);
    expect((await render()).outcome).toBe("built");
    await expect(copyText(pool, planned.select, planned.format)).rejects.toMatchObject({ code: RENDERED_PLAN_STALE_SQLSTATE });
    const now = await pagesNow(500);
    expect(now).toMatchObject({ current: true, sources: ["table"] });
    expect(now.pages).toEqual(await livePages(500));
    expect(now.pages.join("")).toContain("Product zero again");
  });

  it("a page planned on a current table refuses it once the dataset's rows were written; planned again it reads the table patched", async () => {
    const request = { organizationId: org, limit: 500 };
    const planned = renderedPageStatement(await loadRenderedPlan(pool, org, dataset), dataset, request, codec);
    expect(planned.source).toBe("table");
    await pool.query("UPDATE suppliers SET description = 'written after the plan', last_modified = clock_timestamp() WHERE organization_id = $1 AND name = 'Supplier 4'", [org]);
    await expect(copyText(pool, planned.select, planned.format)).rejects.toMatchObject({ code: RENDERED_PLAN_STALE_SQLSTATE });
    const now = await pagesNow(500);
    expect(now).toMatchObject({ current: false, patchable: true, sources: ["patched"] });
    expect(now.pages).toEqual(await livePages(500));
    expect(now.pages.join("")).toContain("written after the plan");
    // A patched plan still holds after more writes of the dataset's own rows: they are rendered live.
    const patched = renderedPageStatement(await loadRenderedPlan(pool, org, dataset), dataset, request, codec);
    await pool.query("UPDATE suppliers SET description = 'and after that', last_modified = clock_timestamp() WHERE organization_id = $1 AND name = 'Supplier 4'", [org]);
    expect(await copyText(pool, patched.select, patched.format)).toContain("and after that");
    expect((await render()).outcome).toBe("updated");
  });

  it("a new attribute (new columns) builds a new table; the page of the old columns is not served from it", async () => {
    await addAttribute(pool, org, { kind: "suppliers", key: "grade", type: "Text", position: 1 });
    await syncOrganization(pool, org, DEFAULT_SYNCERS);
    const old = dataset;
    dataset = (await loadRegistryEntry(pool, org, key))!;
    expect(dataset.columns.length).toBe(old.columns.length + 1);
    const plan = (await loadRenderedPlan(pool, org, dataset))!;
    expect(servesRendered(dataset, plan.state)).toBe(false);
    const candidates = await renderCandidates(pool, { limit: 1000, dutyFactor: 0, organizationId: org });
    expect(candidates).toContainEqual({ organizationId: org, dataset: key });
    expect((await render()).outcome).toBe("built");
    const { pages, current } = await pagesNow(50);
    expect(current).toBe(true);
    expect(pages).toEqual(await livePages(50));
  });

  it("honours the visibility horizon like the live page", async () => {
    const horizon = BigInt(Date.now() - 60_000) * 1000n;
    const plan = (await loadRenderedPlan(pool, org, dataset))!;
    const state = plan.state as typeof plan.state & { tableName: string };
    const rendered = await copyText(pool, buildRenderedPageQuery(dataset, state, { organizationId: org, limit: 500, visibleBeforeMicros: horizon }, codec, "table"), RENDERED_PAGE_COPY_FORMAT);
    const live = await copyText(pool, buildPageQuery(dataset, { organizationId: org, limit: 500, visibleBeforeMicros: horizon }, codec));
    expect(rendered).toEqual(live);
    expect(rendered.trimEnd().split("\n").length).toBeLessThan(110);
  });

  it("small datasets are not rendered; a disabled organization's table is removed", async () => {
    const small = await renderDataset(pool, org, "resources_lots", { codec, minRows: 1 });
    expect(small.outcome).toBe("small");
    const lots = (await loadRegistryEntry(pool, org, "resources_lots"))!;
    const plan = (await loadRenderedPlan(pool, org, lots))!;
    expect(plan.state.tableName).toBeNull();
    expect(servesRendered(lots, plan.state)).toBe(false);
    const table = (await loadRenderedPlan(pool, org, dataset))!.state.tableName;
    await pool.query("UPDATE export_organizations SET export_enabled = false WHERE organization_id = $1", [org]);
    expect((await render()).outcome).toBe("removed");
    expect(await loadRenderedPlan(pool, org, dataset)).toBeUndefined();
    expect((await pool.query("SELECT count(*)::int AS n FROM rendered_dataset_retired_tables WHERE table_name = $1", [table])).rows[0].n).toBe(1);
  });
});

describe("rendered deviations", () => {
  it("equal the live pages byte for byte (borrowed submission, step, site and people columns, _local times)", async () => {
    const pool = testPool();
    try {
      const org = await createTestOrganization(pool);
      const [site, form, submission, step, person, team] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await pool.query("INSERT INTO sites (organization_id, id, name, path, time_zone) VALUES ($1, $2, 'Osaka, \"East\"', 'Japan / Osaka', 'Asia/Tokyo')", [org, site]);
      await pool.query("INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1, $2, 'Intake check', 'IC')", [org, form]);
      await pool.query("INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status) VALUES ($1, $2, $3, 'IC-7', $4, 'Completed')", [org, submission, form, site]);
      await pool.query("INSERT INTO submission_steps (organization_id, id, submission_id, name, status) VALUES ($1, $2, $3, 'Receive', 'Completed')", [org, step, submission]);
      await pool.query("INSERT INTO employees (organization_id, id, first_name, last_name) VALUES ($1, $2, 'Kim', 'Sato')", [org, person]);
      await pool.query("INSERT INTO teams (organization_id, id, name) VALUES ($1, $2, 'QA team')", [org, team]);
      await pool.query(
        `INSERT INTO deviations (organization_id, id, code, submission_id, step_id, severity, status, display_value, assigned_user_id, assigned_team_id,
           comment, resolved_by_id, resolved_at, created_at, last_modified)
         SELECT $1, gen_random_uuid(), 'DEV-' || g, $2, CASE WHEN g % 2 = 0 THEN $3::uuid END, 'High', 'Resolved', 'v "' || g || '", ok', $4, $5,
                CASE WHEN g % 3 = 0 THEN 'line' || chr(10) || 'two\\' END, $4, now() - (g || ' minutes')::interval, now() - (g || ' hours')::interval, now() - (g || ' seconds')::interval
           FROM generate_series(1, 30) g`,
        [org, submission, step, person, team],
      );
      await syncOrganization(pool, org, DEFAULT_SYNCERS);
      const dataset = (await loadRegistryEntry(pool, org, "deviations"))!;
      expect((await renderDataset(pool, org, "deviations", { codec, minRows: 0 })).outcome).toBe("built");
      const plan = (await loadRenderedPlan(pool, org, dataset))!;
      expect(plan.current && servesRendered(dataset, plan.state)).toBe(true);
      const state = plan.state as typeof plan.state & { tableName: string };
      const rendered = await copyText(pool, buildRenderedPageQuery(dataset, state, { organizationId: org, limit: 100 }, codec, "table"), RENDERED_PAGE_COPY_FORMAT);
      const live = await copyText(pool, buildPageQuery(dataset, { organizationId: org, limit: 100 }, codec));
      expect(rendered.trimEnd().split("\n").length).toBeGreaterThanOrEqual(30);
      expect(rendered).toEqual(live);
      expect(live).toContain('"Osaka, ""East"""');
      // Written since the render: the changed and the new deviation rendered live, the others from the table.
      await pool.query("UPDATE deviations SET comment = 'now, \"changed\"', last_modified = clock_timestamp() WHERE organization_id = $1 AND code = 'DEV-4'", [org]);
      await pool.query(
        `INSERT INTO deviations (organization_id, id, code, submission_id, severity, status, display_value, created_at, last_modified)
         VALUES ($1, gen_random_uuid(), 'DEV-new', $2, 'Low', 'Open', 'fresh', now(), now() - interval '90 seconds')`,
        [org, submission],
      );
      const patchedPlan = (await loadRenderedPlan(pool, org, dataset))!;
      expect(patchedPlan).toMatchObject({ current: false, patchable: true });
      for (const limit of [100, 4]) {
        const pagesOf = async (query: (after: CursorPosition | undefined) => string, format: "csv" | "text") => {
          const pages: string[] = [];
          let after: CursorPosition | undefined;
          for (;;) {
            const page = await copyText(pool, query(after), format);
            if (!page) return pages;
            pages.push(page);
            after = lastPosition(page, rowsBinding(org, dataset));
          }
        };
        const patched = await pagesOf((after) => buildRenderedPageQuery(dataset, state, { organizationId: org, limit, after }, codec, "patched"), RENDERED_PAGE_COPY_FORMAT);
        const livePaged = await pagesOf((after) => buildPageQuery(dataset, { organizationId: org, limit, after }, codec), "csv");
        expect(patched).toEqual(livePaged);
        // As the export reads them: each page patched, as its own snapshot's state says.
        const exported: string[] = [];
        let after: CursorPosition | undefined;
        for (let read = await renderedPage(pool, dataset, { organizationId: org, limit }); read.page; read = await renderedPage(pool, dataset, { organizationId: org, limit, after })) {
          expect(read.source).toBe("patched");
          exported.push(read.page);
          after = lastPosition(read.page, rowsBinding(org, dataset));
        }
        expect(exported).toEqual(livePaged);
        expect(patched.join("")).toContain('now, ""changed""');
        expect(patched.join("")).toContain("DEV-new");
      }
    } finally {
      await pool.end();
    }
  });
});
