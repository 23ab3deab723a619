import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { FIXED_DATASETS_BY_KEY } from "@exportsvc/datasets";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { exportPage, registerFixedDataset, startExport, type AttributeDef, type ExportHarness } from "./support";

/** Every value rule of the resource datasets and deviations, checked through real gRPC and COPY. */
let pool: Pool;
let harness: ExportHarness;
let org: string;

const ids = () => randomUUID();
const T0 = "2024-03-10 08:15:30.123456+00";

beforeAll(async () => {
  pool = testPool();
  harness = await startExport();
  org = await createTestOrganization(pool);
});

afterAll(async () => {
  await harness.stop();
  await pool.end();
});

const page = (datasetKey: string) => exportPage(harness.client, { organizationId: org, datasetKey });
const rowById = async (datasetKey: string, id: string) => {
  const p = await page(datasetKey);
  const row = p.rows.find((r) => r.id === id);
  if (!row) throw new Error(`row ${id} not in ${datasetKey}`);
  return { row, page: p };
};
/** The CSV line of a row (to tell NULL, an empty unquoted field, from '' written as ""). */
const lineOf = (raw: string, id: string) => raw.split("\n").find((l) => l.startsWith(`${id},`))!;

async function site(name: string, opts: { zone?: string; parent?: string } = {}) {
  const id = ids();
  await pool.query(`INSERT INTO sites (organization_id, id, parent_id, name, time_zone, path) VALUES ($1,$2,$3,$4,$5,$6)`, [
    org,
    id,
    opts.parent ?? null,
    name,
    opts.zone ?? "UTC",
    opts.parent ? `${opts.parent}.${id}` : id,
  ]);
  return id;
}

describe("CSV dialect and header", () => {
  it("writes the header row (column keys then _cursor) even without rows, and no BOM", async () => {
    const empty = await createTestOrganization(pool);
    await registerFixedDataset(pool, empty, "resources_chemicals");
    const p = await exportPage(harness.client, { organizationId: empty, datasetKey: "resources_chemicals" });
    expect(p.rows).toHaveLength(0);
    expect(p.header).toEqual([...FIXED_DATASETS_BY_KEY.get("resources_chemicals")!.coreColumns.map((c) => c.key), "_cursor"]);
    expect(p.raw.charCodeAt(0)).not.toBe(0xfeff);
    expect(p.raw.endsWith("\n")).toBe(true);
  });
});

describe("resources_suppliers", () => {
  it("exports own columns, NULL as empty and '' as \"\", product and parent lists sorted by name, live names", async () => {
    await registerFixedDataset(pool, org, "resources_suppliers");
    const supplier = ids();
    const parentA = ids();
    const parentB = ids();
    const productZ = ids();
    const productA = ids();
    const deletedProduct = ids();
    await pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description, website_url, status, country, last_modified) VALUES
        ($1,$2,'Acme, Inc.','',NULL,'Approved','NL',$3), ($1,$4,'Zeta Holding',NULL,NULL,NULL,NULL,$3), ($1,$5,'Alpha "Group"',NULL,NULL,NULL,NULL,$3)`,
      [org, supplier, T0, parentB, parentA],
    );
    await pool.query(`INSERT INTO supplier_parents VALUES ($1,$2,$3), ($1,$2,$4)`, [org, supplier, parentB, parentA]);
    await pool.query(`INSERT INTO products (organization_id, id, name) VALUES ($1,$2,'Zucchini'), ($1,$3,'Apples')`, [org, productZ, productA]);
    await pool.query(`INSERT INTO supplier_products VALUES ($1,$2,$3), ($1,$2,$4), ($1,$2,$5)`, [org, supplier, productZ, productA, deletedProduct]);

    const { row, page: p } = await rowById("resources_suppliers", supplier);
    expect(row).toMatchObject({
      name: "Acme, Inc.",
      description: "",
      status: "Approved",
      country: "NL",
      products: "Apples, Zucchini",
      parent_names: 'Alpha "Group", Zeta Holding',
      last_modified: T0,
    });
    const line = lineOf(p.raw, supplier);
    expect(line).toContain(`,"Acme, Inc.","",,Approved,`);
    expect(line).toContain(`"Alpha ""Group"", Zeta Holding"`);

    // A renamed related record shows its new name; a deleted one disappears from the list.
    await pool.query(`UPDATE products SET name = 'Aubergine' WHERE organization_id = $1 AND id = $2`, [org, productZ]);
    await pool.query(`DELETE FROM products WHERE organization_id = $1 AND id = $2`, [org, productA]);
    expect((await rowById("resources_suppliers", supplier)).row.products).toBe("Aubergine");
  });
});

describe("resources_customers and resources_employees names", () => {
  it("joins first and last name with one space, a single space when both are missing", async () => {
    await registerFixedDataset(pool, org, "resources_customers");
    const both = ids();
    const none = ids();
    const firstOnly = ids();
    await pool.query(
      `INSERT INTO customers (organization_id, id, name, contact_first_name, contact_last_name) VALUES
        ($1,$2,'C1','Ann','Lee'), ($1,$3,'C2',NULL,NULL), ($1,$4,'C3','Bo',NULL)`,
      [org, both, none, firstOnly],
    );
    const p = await page("resources_customers");
    const by = (id: string) => p.rows.find((r) => r.id === id)!;
    expect(by(both).contact_name).toBe("Ann Lee");
    expect(by(none).contact_name).toBe(" ");
    expect(by(firstOnly).contact_name).toBe("Bo ");
  });

  it("exports employees with teams and sites lists", async () => {
    await registerFixedDataset(pool, org, "resources_employees");
    const employee = ids();
    const teamB = ids();
    const teamA = ids();
    const siteX = await site("Xanten");
    await pool.query(`INSERT INTO employees (organization_id, id, first_name, last_name, job_title) VALUES ($1,$2,NULL,NULL,'QA')`, [org, employee]);
    await pool.query(`INSERT INTO teams (organization_id, id, name) VALUES ($1,$2,'Blue'), ($1,$3,'Amber')`, [org, teamB, teamA]);
    await pool.query(`INSERT INTO employee_teams VALUES ($1,$2,$3), ($1,$2,$4)`, [org, employee, teamB, teamA]);
    await pool.query(`INSERT INTO employee_sites VALUES ($1,$2,$3)`, [org, employee, siteX]);
    const { row } = await rowById("resources_employees", employee);
    expect(row).toMatchObject({ name: " ", job_title: "QA", teams: "Amber, Blue", sites: "Xanten" });
  });
});

describe("resources_products", () => {
  it("maps product_type, lists allergens/customers/sites/suppliers, writes numbers plainly", async () => {
    await registerFixedDataset(pool, org, "resources_products");
    const category = ids();
    await pool.query(`INSERT INTO product_categories (organization_id, id, name) VALUES ($1,$2,'Dairy')`, [org, category]);
    const types: Array<[number | null, string]> = [
      [0, "RawMaterial"],
      [1, "WorkInProgress"],
      [2, "FinishedGood"],
      [3, "Packaging"],
      [7, "7"],
      [null, ""],
    ];
    const productIds: string[] = [];
    for (const [type] of types) {
      const id = ids();
      productIds.push(id);
      await pool.query(
        `INSERT INTO products (organization_id, id, name, product_type, product_category_id, default_shelf_life_quantity) VALUES ($1,$2,'P',$3,$4,$5)`,
        [org, id, type, category, "12.500"],
      );
    }
    const main = productIds[0];
    const customer = ids();
    const supplier = ids();
    const siteA = await site("Antwerp");
    await pool.query(`INSERT INTO product_allergens VALUES ($1,$2,'Milk'), ($1,$2,'Eggs')`, [org, main]);
    await pool.query(`INSERT INTO customers (organization_id, id, name) VALUES ($1,$2,'Buyer')`, [org, customer]);
    await pool.query(`INSERT INTO customer_products VALUES ($1,$2,$3)`, [org, customer, main]);
    await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1,$2,'Seller')`, [org, supplier]);
    await pool.query(`INSERT INTO supplier_products VALUES ($1,$2,$3)`, [org, supplier, main]);
    await pool.query(`INSERT INTO product_sites VALUES ($1,$2,$3)`, [org, main, siteA]);

    const p = await page("resources_products");
    const by = (id: string) => p.rows.find((r) => r.id === id)!;
    types.forEach(([, expected], i) => expect(by(productIds[i]).product_type).toBe(expected));
    expect(by(main)).toMatchObject({
      product_category_name: "Dairy",
      allergens: "Eggs, Milk",
      default_shelf_life_quantity: "12.5",
      customers: "Buyer",
      suppliers: "Seller",
      sites: "Antwerp",
    });
    expect(by(productIds[1]).allergens).toBe("");
    expect(lineOf(p.raw, productIds[1])).not.toContain('""');
  });
});

describe("site columns and hierarchies", () => {
  it("exports site_id/site_name/site_path, and an empty name once the related record is deleted (the id stays)", async () => {
    await registerFixedDataset(pool, org, "resources_equipment");
    await registerFixedDataset(pool, org, "resources_areas");
    const parentSite = await site("Plant");
    const siteId = await site("Line 1", { parent: parentSite });
    const outerArea = ids();
    const area = ids();
    const equipment = ids();
    await pool.query(
      `INSERT INTO areas (organization_id, id, name, size, parent_id, site_id, path) VALUES
        ($1,$2,'Hall',NULL,NULL,$4,$5), ($1,$3,'Cold room',100.0,$2,$4,$6)`,
      [org, outerArea, area, siteId, outerArea, `${outerArea}.${area}`],
    );
    await pool.query(`INSERT INTO equipment (organization_id, id, name, site_id, area_id) VALUES ($1,$2,'Mixer',$3,$4)`, [org, equipment, siteId, area]);

    const eq = (await rowById("resources_equipment", equipment)).row;
    expect(eq).toMatchObject({ site_id: siteId, site_name: "Line 1", site_path: `${parentSite}.${siteId}`, area_name: "Cold room" });
    const ar = (await rowById("resources_areas", area)).row;
    expect(ar).toMatchObject({ size: "100", area_path: `${outerArea}.${area}`, parent_name: "Hall", site_name: "Line 1" });

    await pool.query(`DELETE FROM sites WHERE organization_id = $1 AND id = $2`, [org, siteId]);
    const after = (await rowById("resources_equipment", equipment)).row;
    expect(after).toMatchObject({ site_id: siteId, site_name: "", site_path: "" });
  });
});

describe("resources_lots, resources_recipes, resources_product_categories, resources_chemicals", () => {
  it("writes dates, numbers, booleans and related names", async () => {
    await registerFixedDataset(pool, org, "resources_lots");
    await registerFixedDataset(pool, org, "resources_recipes");
    await registerFixedDataset(pool, org, "resources_product_categories");
    await registerFixedDataset(pool, org, "resources_chemicals");
    const product = ids();
    const lot = ids();
    const recipe = ids();
    const parentCategory = ids();
    const category = ids();
    const chemical = ids();
    const siteB = await site("Bremen");
    await pool.query(`INSERT INTO products (organization_id, id, name) VALUES ($1,$2,'Cheese')`, [org, product]);
    await pool.query(
      `INSERT INTO lots (organization_id, id, code, quantity, expiry_date, date_received, product_id, site_id) VALUES ($1,$2,'L-1',0.250,'2025-01-31','2024-12-01',$3,$4)`,
      [org, lot, product, siteB],
    );
    await pool.query(
      `INSERT INTO recipes (organization_id, id, name, output_quantity, has_unpublished_changes, output_product_id) VALUES ($1,$2,'R',-3,true,$3)`,
      [org, recipe, product],
    );
    await pool.query(`INSERT INTO product_categories (organization_id, id, name, parent_id) VALUES ($1,$2,'Food',NULL), ($1,$3,'Cheese',$2)`, [
      org,
      parentCategory,
      category,
    ]);
    await pool.query(`INSERT INTO chemicals (organization_id, id, name) VALUES ($1,$2,'Chlorine')`, [org, chemical]);
    await pool.query(`INSERT INTO chemical_sites VALUES ($1,$2,$3)`, [org, chemical, siteB]);

    expect((await rowById("resources_lots", lot)).row).toMatchObject({
      quantity: "0.25",
      expiry_date: "2025-01-31",
      date_received: "2024-12-01",
      date_produced: "",
      product_id: product,
      product_name: "Cheese",
      site_name: "Bremen",
    });
    expect((await rowById("resources_recipes", recipe)).row).toMatchObject({
      output_quantity: "-3",
      has_unpublished_changes: "t",
      output_product_name: "Cheese",
    });
    expect((await rowById("resources_product_categories", category)).row.parent_name).toBe("Food");
    expect((await rowById("resources_chemicals", chemical)).row.sites).toBe("Bremen");
  });
});

describe("resources_documents", () => {
  it("exports the published version label and is_archived for every status", async () => {
    await registerFixedDataset(pool, org, "resources_documents");
    const published = ids();
    const draft = ids();
    const archived = ids();
    const team = ids();
    await pool.query(
      `INSERT INTO documents (organization_id, id, name, status, is_archived) VALUES
        ($1,$2,'SOP 1','Published',false), ($1,$3,'SOP 2','Draft',false), ($1,$4,'SOP 3','Published',true)`,
      [org, published, draft, archived],
    );
    await pool.query(
      `INSERT INTO document_versions (organization_id, id, document_id, version_label, is_current_published) VALUES
        ($1,gen_random_uuid(),$2,'1.0',false), ($1,gen_random_uuid(),$2,'2.0',true), ($1,gen_random_uuid(),$3,'0.1',false)`,
      [org, published, draft],
    );
    await pool.query(`INSERT INTO teams (organization_id, id, name) VALUES ($1,$2,'Ops')`, [org, team]);
    await pool.query(`INSERT INTO document_teams VALUES ($1,$2,$3)`, [org, published, team]);
    const p = await page("resources_documents");
    const by = (id: string) => p.rows.find((r) => r.id === id)!;
    expect(by(published)).toMatchObject({ version: "2.0", is_archived: "f", teams: "Ops" });
    expect(by(draft)).toMatchObject({ version: "", is_archived: "f" });
    expect(by(archived)).toMatchObject({ is_archived: "t" });
  });
});

describe("custom attributes", () => {
  it("renders every attribute type; ill-fitting values become an empty cell (only that cell)", async () => {
    const def = (key: string, type: AttributeDef["type"]): AttributeDef => ({ id: randomUUID(), kind: "chemicals", key, name: key, type });
    const attrs = [
      def("num", "Number"),
      def("day", "Date"),
      def("moment", "DateTime"),
      def("docs", "Document"),
      def("doc", "SingleDocument"),
      def("pick", "Select"),
      def("picks", "MultiSelect"),
      def("flag", "Boolean"),
      def("note", "Text"),
    ];
    const attrOrg = await createTestOrganization(pool);
    await registerFixedDataset(pool, attrOrg, "resources_chemicals", attrs);
    const docB = randomUUID();
    const docA = randomUUID();
    await pool.query(`INSERT INTO documents (organization_id, id, name) VALUES ($1,$2,'Beta'), ($1,$3,'Alpha')`, [attrOrg, docB, docA]);
    const good = randomUUID();
    const bad = randomUUID();
    const a = (i: number) => attrs[i].id;
    const goodValues = {
      [a(0)]: "1.50",
      [a(1)]: "2024-02-29",
      [a(2)]: "2024-05-01T10:00:00+02:00",
      [a(3)]: [docB, docA, randomUUID(), "not-a-uuid"],
      [a(4)]: docB,
      [a(5)]: "opt_b",
      [a(6)]: ["zulu", "alpha", "mike"],
      [a(7)]: true,
      [a(8)]: "",
    };
    const badValues = {
      [a(0)]: "12 kg",
      [a(1)]: "2024-02-30",
      [a(2)]: "2024-05-01 10:00",
      [a(3)]: [],
      [a(5)]: "opt_a",
      [a(6)]: [],
      [a(8)]: "kept",
    };
    await pool.query(`INSERT INTO chemicals (organization_id, id, name, attributes) VALUES ($1,$2,'Good',$3), ($1,$4,'Bad',$5)`, [
      attrOrg,
      good,
      JSON.stringify(goodValues),
      bad,
      JSON.stringify(badValues),
    ]);
    const p = await exportPage(harness.client, { organizationId: attrOrg, datasetKey: "resources_chemicals" });
    expect(p.header.slice(-10)).toEqual(["num", "day", "moment", "docs", "doc", "pick", "picks", "flag", "note", "_cursor"]);
    const by = (id: string) => p.rows.find((r) => r.id === id)!;
    expect(by(good)).toMatchObject({
      num: "1.5",
      day: "2024-02-29",
      moment: "2024-05-01 08:00:00+00",
      docs: "Alpha, Beta",
      doc: "Beta",
      pick: "opt_b",
      flag: "true",
      note: "",
    });
    expect(JSON.parse(by(good).picks)).toEqual(["alpha", "mike", "zulu"]);
    expect(by(bad)).toMatchObject({ num: "", day: "", moment: "", docs: "", doc: "", pick: "opt_a", picks: "[]", flag: "", note: "kept" });
    expect(lineOf(p.raw, good)).toContain(`,true,"",`);
  });
});

describe("deviations", () => {
  it("borrows submission columns, names people from the employee directory and writes _local in the site's zone", async () => {
    await registerFixedDataset(pool, org, "deviations");
    const siteId = await site("Osaka", { zone: "Asia/Tokyo" });
    const form = randomUUID();
    const linkedForm = randomUUID();
    const submission = randomUUID();
    const linked = randomUUID();
    const step = randomUUID();
    const person = randomUUID();
    const team = randomUUID();
    const supplier = randomUUID();
    await pool.query(`INSERT INTO forms (organization_id, id, name, record_prefix) VALUES ($1,$2,'Intake check','IC'), ($1,$3,'CAPA','CA')`, [
      org,
      form,
      linkedForm,
    ]);
    await pool.query(
      `INSERT INTO submissions (organization_id, id, form_id, record_id, site_id, status, is_archived) VALUES
        ($1,$2,$3,'IC-7',$4,'Completed',true), ($1,$5,$6,'CA-1',NULL,'InProgress',false)`,
      [org, submission, form, siteId, linked, linkedForm],
    );
    await pool.query(`INSERT INTO submission_steps (organization_id, id, submission_id, name, status) VALUES ($1,$2,$3,'Receive','Completed')`, [
      org,
      step,
      submission,
    ]);
    await pool.query(`INSERT INTO employees (organization_id, id, first_name, last_name) VALUES ($1,$2,'Kim','Sato')`, [org, person]);
    await pool.query(`INSERT INTO teams (organization_id, id, name) VALUES ($1,$2,'QA team')`, [org, team]);
    await pool.query(`INSERT INTO suppliers (organization_id, id, name) VALUES ($1,$2,'Farm Co')`, [org, supplier]);

    const signed = randomUUID();
    const unsignedLinked = randomUUID();
    const openGone = randomUUID();
    const gonePerson = randomUUID();
    await pool.query(
      `INSERT INTO deviations (organization_id, id, code, submission_id, step_id, severity, status, resolution_type,
         field_key, field_label, display_value, row_id, assigned_user_id, assigned_team_id, supplier_id, comment,
         resolution_comment, resolved_by_id, resolved_at, signed_by_id, signed_at, linked_record_id, created_at, last_modified)
       VALUES
        ($1,$2,'DEV-1',$3,$4,'High','Resolved','Comment','temp','Temperature','9.5','row-1',$5,$6,$7,'note','fixed',$5,
         '2024-06-01 23:30:00+00',$5,'2024-06-01 23:31:00+00',NULL,'2024-06-01 10:00:00+00','2024-06-01 23:31:00+00'),
        ($1,$8,'DEV-2',$3,$4,'Low','Resolved','LinkedResolutionRecord',NULL,NULL,NULL,NULL,NULL,$6,NULL,NULL,NULL,$5,
         '2024-06-02 00:00:00+00',$5,'2024-06-02 00:00:00+00',$9,'2024-06-01 10:00:00+00','2024-06-02 00:00:00+00'),
        ($1,$10,'DEV-3',$3,NULL,'Critical','Open',NULL,NULL,NULL,NULL,NULL,$11,$6,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,
         '2024-06-01 10:00:00+00','2024-06-03 00:00:00+00')`,
      [org, signed, submission, step, person, team, supplier, unsignedLinked, linked, openGone, gonePerson],
    );

    const p = await page("deviations");
    const by = (id: string) => p.rows.find((r) => r.id === id)!;
    expect(by(signed)).toMatchObject({
      code: "DEV-1",
      status: "Resolved",
      is_resolved: "t",
      resolution_type: "Comment",
      workflow_name: "Intake check",
      form_name: "Intake check",
      submission_id: submission,
      record_id: "IC-7",
      submission_status: "Completed",
      is_archived: "t",
      step_name: "Receive",
      step_status: "Completed",
      site_name: "Osaka",
      site_id: siteId,
      site_path: siteId,
      assigned_to: "Kim Sato",
      assigned_user_name: "Kim Sato",
      assigned_team_name: "QA team",
      supplier_name: "Farm Co",
      comment: "note",
      resolution_comment: "fixed",
      resolved_by: "Kim Sato",
      resolved_at: "2024-06-01 23:30:00+00",
      resolved_at_local: "2024-06-02 08:30:00",
      signed_by: "Kim Sato",
      signed_at: "2024-06-01 23:31:00+00",
      signed_at_local: "2024-06-02 08:31:00",
      created_at: "2024-06-01 10:00:00+00",
      created_at_local: "2024-06-01 19:00:00",
      last_modified_local: "2024-06-02 08:31:00",
      linked_record_code: "",
    });
    // A resolution through a linked record has no signature, even when one is stored.
    expect(by(unsignedLinked)).toMatchObject({
      resolution_type: "LinkedResolutionRecord",
      signed_by: "",
      signed_at: "",
      signed_at_local: "",
      linked_record_code: "CA-1",
      linked_record_status: "InProgress",
      linked_record_source: "CAPA",
      assigned_to: "QA team",
      assigned_user_name: "",
    });
    // A person without a live employee record: names empty, assigned_to falls back to the team.
    expect(by(openGone)).toMatchObject({ is_resolved: "f", resolution_type: "", assigned_user_name: "", assigned_to: "QA team", step_name: "" });
  });
});
