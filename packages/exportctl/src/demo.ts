import { createHash } from "node:crypto";
import type { Pool } from "pg";
import { createOrm } from "@exportsvc/db";
import { applyDocument } from "./apply/apply";
import type { ApplyDocumentInput } from "./apply/schema";
import { issueKey, listKeys } from "./keys";
import { createOrganization } from "./organizations";

/** The organization `npm start` seeds. */
export const DEMO_ORGANIZATION_ID = "0d3e6f6a-5c1b-4d7e-9a42-3f0c1e2d9b10";
export const DEMO_ORGANIZATION_NAME = "Demo Foods Ltd";

/** Stable ids: the same name always gives the same uuid within an organization. */
function idFor(organizationId: string, name: string): string {
  const h = createHash("sha1").update(`${organizationId}/${name}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16], 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const LONG_ATTRIBUTE_KEY = "Certification body accreditation reference number for audit purposes x"; // 70 characters

/**
 * Records that exist first and are deleted later, so that the demo shows what deletions leave
 * behind: dangling ids with empty names.
 */
export function demoHistoryDocument(organizationId: string): ApplyDocumentInput {
  const id = (name: string) => idFor(organizationId, name);
  return {
    organization: organizationId,
    sites: [{ id: id("site:old-warehouse"), name: "Old Warehouse", timeZone: "America/Chicago" }],
    employees: [{ id: id("employee:former"), firstName: "Frank", lastName: "Former", jobTitle: "QA Technician" }],
    products: [{ id: id("product:discontinued"), name: "Discontinued Syrup", productType: "FinishedGood" }],
  };
}

/** A realistic apply document exercising every resource kind, attribute type, field type and deviation state. */
export function demoDocument(organizationId: string): ApplyDocumentInput {
  const id = (name: string) => idFor(organizationId, name);
  const site = { hq: id("site:hq"), north: id("site:plant-north"), line1: id("site:line-1"), south: id("site:plant-south"), old: id("site:old-warehouse") };
  const team = { qa: id("team:qa"), production: id("team:production"), maintenance: id("team:maintenance") };
  const emp = { ana: id("employee:ana"), ben: id("employee:ben"), chloe: id("employee:chloe"), dev: id("employee:dev"), former: id("employee:former") };
  const attr = (name: string) => id(`attribute:${name}`);
  const doc = { sop: id("document:sop"), haccp: id("document:haccp"), cert: id("document:cert") };
  const prod = {
    flour: id("product:flour"), sugar: id("product:sugar"), dough: id("product:dough"), bread: id("product:bread"),
    box: id("product:box"), discontinued: id("product:discontinued"),
  };
  const cat = { raw: id("category:raw"), baked: id("category:baked"), grain: id("category:grain") };
  const sup = { mill: id("supplier:mill"), sweet: id("supplier:sweet"), pack: id("supplier:pack"), group: id("supplier:group") };
  const area = { north: id("area:north-floor"), mixing: id("area:mixing"), oven: id("area:oven"), store: id("area:south-store") };
  const form = { temp: id("form:temperature"), audit: id("form:audit"), retired: id("form:retired") };
  const f = (name: string) => id(`field:${name}`);
  const sub = (n: number) => id(`submission:${n}`);
  const step = (n: number, s: string) => id(`step:${n}:${s}`);

  const steps = (n: number, recording: "Pending" | "InProgress" | "Completed", verification: "Pending" | "Completed" | "Skipped") => [
    { id: step(n, "record"), name: "Record", kind: "Recording" as const, status: recording },
    { id: step(n, "verify"), name: "Verify", kind: "Verification" as const, status: verification },
  ];

  return {
    organization: organizationId,
    sites: [
      { id: site.hq, name: "Head Office", timeZone: "Europe/Berlin" },
      { id: site.north, parentId: site.hq, name: "Plant North", timeZone: "America/Chicago" },
      { id: site.line1, parentId: site.north, name: "Line 1", timeZone: "America/Chicago" },
      { id: site.south, parentId: site.hq, name: "Plant South", timeZone: "Europe/Berlin" },
    ],
    teams: [
      { id: team.qa, name: "Quality Assurance" },
      { id: team.production, name: "Production" },
      { id: team.maintenance, name: "Maintenance" },
    ],
    customAttributes: [
      // Suppliers: one attribute of every type, plus awkward keys.
      { id: attr("sup-text"), resourceKind: "suppliers", key: "Account Manager", name: "Account Manager", type: "Text" },
      { id: attr("sup-number"), resourceKind: "suppliers", key: "Credit Limit", name: "Credit Limit", type: "Number" },
      { id: attr("sup-date"), resourceKind: "suppliers", key: "Approved On", name: "Approved On", type: "Date" },
      { id: attr("sup-datetime"), resourceKind: "suppliers", key: "Last Audit", name: "Last Audit", type: "DateTime" },
      { id: attr("sup-document"), resourceKind: "suppliers", key: "Certificates", name: "Certificates", type: "Document" },
      { id: attr("sup-single-document"), resourceKind: "suppliers", key: "Contract", name: "Contract", type: "SingleDocument" },
      { id: attr("sup-select"), resourceKind: "suppliers", key: "Risk", name: "Risk Rating", type: "Select" },
      { id: attr("sup-multiselect"), resourceKind: "suppliers", key: "Regions", name: "Regions Served", type: "MultiSelect" },
      { id: attr("sup-boolean"), resourceKind: "suppliers", key: "Organic", name: "Organic Certified", type: "Boolean" },
      { id: attr("sup-url"), resourceKind: "suppliers", key: "Portal", name: "Supplier Portal", type: "Url" },
      { id: attr("sup-email"), resourceKind: "suppliers", key: "Quality Email", name: "Quality Contact Email", type: "Email" },
      { id: attr("sup-phone"), resourceKind: "suppliers", key: "Hotline", name: "Emergency Hotline", type: "Phone" },
      { id: attr("sup-row-index"), resourceKind: "suppliers", key: "Row Index", name: "Row Index", type: "Text" },
      { id: attr("sup-name-clash"), resourceKind: "suppliers", key: "name", name: "Trading Name", type: "Text" },
      { id: attr("sup-long"), resourceKind: "suppliers", key: LONG_ATTRIBUTE_KEY, name: "Accreditation Reference", type: "Text" },
      // Other kinds.
      { id: attr("prod-number"), resourceKind: "products", key: "Unit Weight", name: "Unit Weight (g)", type: "Number" },
      { id: attr("prod-date"), resourceKind: "products", key: "Launch Date", name: "Launch Date", type: "Date" },
      { id: attr("prod-select"), resourceKind: "products", key: "Storage", name: "Storage Condition", type: "Select" },
      { id: attr("prod-multiselect"), resourceKind: "products", key: "Claims", name: "Label Claims", type: "MultiSelect" },
      { id: attr("prod-document"), resourceKind: "products", key: "Spec Sheet", name: "Specification", type: "SingleDocument" },
      { id: attr("prod-text"), resourceKind: "products", key: "Brand", name: "Brand", type: "Text" },
      { id: attr("prod-datetime"), resourceKind: "products", key: "Last Reviewed", name: "Last Reviewed", type: "DateTime" },
      { id: attr("prod-documents"), resourceKind: "products", key: "Certificates", name: "Certificates", type: "Document" },
      { id: attr("prod-boolean"), resourceKind: "products", key: "Vegan", name: "Vegan", type: "Boolean" },
      { id: attr("prod-url"), resourceKind: "products", key: "Product Page", name: "Product Page", type: "Url" },
      { id: attr("prod-email"), resourceKind: "products", key: "Owner Email", name: "Product Owner Email", type: "Email" },
      { id: attr("prod-phone"), resourceKind: "products", key: "Recall Line", name: "Recall Line", type: "Phone" },
      { id: attr("lot-datetime"), resourceKind: "lots", key: "Released At", name: "Released At", type: "DateTime" },
      { id: attr("lot-number"), resourceKind: "lots", key: "Temperature", name: "Arrival Temperature", type: "Number" },
      { id: attr("lot-boolean"), resourceKind: "lots", key: "On Hold", name: "On Hold", type: "Boolean" },
      { id: attr("lot-status"), resourceKind: "lots", key: "status", name: "QA Status", type: "Text" },
      { id: attr("emp-email"), resourceKind: "employees", key: "Work Email", name: "Work Email", type: "Email" },
      { id: attr("emp-phone"), resourceKind: "employees", key: "Mobile", name: "Mobile", type: "Phone" },
      { id: attr("area-text"), resourceKind: "areas", key: "Hygiene Zone", name: "Hygiene Zone", type: "Text" },
      { id: attr("eq-date"), resourceKind: "equipment", key: "Calibrated On", name: "Calibrated On", type: "Date" },
      { id: attr("cust-select"), resourceKind: "customers", key: "Tier", name: "Customer Tier", type: "Select" },
      { id: attr("chem-number"), resourceKind: "chemicals", key: "Concentration", name: "Concentration (%)", type: "Number" },
      { id: attr("cat-text"), resourceKind: "productCategories", key: "GL Code", name: "GL Code", type: "Text" },
      { id: attr("recipe-number"), resourceKind: "recipes", key: "Yield", name: "Yield (%)", type: "Number" },
    ],
    employees: [
      { id: emp.ana, firstName: "Ana", lastName: "Alvarez", jobTitle: "QA Manager", accessLevel: "Admin", teams: [team.qa], sites: [site.hq, site.north], attributes: { "Work Email": "ana@demo-foods.example", Mobile: "+1 312 555 0101" } },
      { id: emp.ben, firstName: "Ben", lastName: "Baker", jobTitle: "Line Lead", accessLevel: "Standard", teams: [team.production], sites: [site.north] },
      { id: emp.chloe, firstName: "Chloé", lastName: "Dubois", jobTitle: "Technician", accessLevel: "Standard", teams: [team.maintenance, team.qa], sites: [site.south], attributes: { "Work Email": "not-an-email" } },
      { id: emp.dev, firstName: null, lastName: null, jobTitle: "Contractor", accessLevel: "Limited" },
    ],
    productCategories: [
      { id: cat.raw, name: "Raw Materials", attributes: { "GL Code": "5000" } },
      { id: cat.grain, name: "Grains", parentId: cat.raw, description: "Milled grains" },
      { id: cat.baked, name: "Baked Goods" },
    ],
    documents: [
      { id: doc.sop, name: "Cleaning SOP", type: "SOP", about: "Line cleaning", status: "Published", versions: [{ id: id("docver:sop:1"), label: "1.0" }, { id: id("docver:sop:2"), label: "2.0", current: true }], sites: [site.north], teams: [team.production] },
      { id: doc.haccp, name: "HACCP Plan, Bakery", type: "Plan", status: "InReview", versions: [{ id: id("docver:haccp:1"), label: "0.9" }], sites: [site.north, site.south], teams: [team.qa] },
      { id: doc.cert, name: "Organic Certificate", type: "Certificate", status: "Published", archived: true, versions: [{ id: id("docver:cert:1"), label: "2023", current: true }] },
    ],
    products: [
      { id: prod.flour, name: "Wheat Flour", productCode: "RM-001", productType: "RawMaterial", productCategoryId: cat.grain, allergenStatus: "Contains", allergens: ["Gluten", "Wheat"], defaultShelfLifeQuantity: 12, defaultShelfLifeUnit: "Months", sites: [site.north, site.south], attributes: {
          "Unit Weight": 25000, "Launch Date": "2019-03-01", Storage: "dry", Claims: ["organic", "non-gmo"], "Spec Sheet": doc.sop, Brand: "Miller's Best",
          "Last Reviewed": "2024-03-01T10:00:00.5Z", Certificates: [doc.cert], Vegan: true, "Product Page": "https://demo-foods.example/flour",
          "Owner Email": "flour@demo-foods.example", "Recall Line": "+1 800 555 0111",
        } },
      { id: prod.sugar, name: "Cane Sugar", productCode: "RM-002", productType: "RawMaterial", productCategoryId: cat.raw, allergenStatus: "None", defaultShelfLifeQuantity: 2.5, defaultShelfLifeUnit: "Years", sites: [site.north], attributes: { "Unit Weight": "n/a", "Launch Date": "2024-02-30", "Last Reviewed": "2024-05-01", Vegan: "sometimes", Claims: ["vegan", "fair-trade", "organic"] } },
      { id: prod.dough, name: "Bread Dough", productType: "WorkInProgress", allergens: ["Gluten"], sites: [site.north] },
      { id: prod.bread, name: "Sourdough Loaf", productCode: "FG-100", productType: "FinishedGood", productCategoryId: cat.baked, allergenStatus: "Contains", allergens: ["Gluten", "Sesame"], defaultShelfLifeQuantity: 5, defaultShelfLifeUnit: "Days", sites: [site.north, site.south, site.old] },
      { id: prod.box, name: "Shipping Box, large", productType: 7, description: "Unknown product type code on purpose" },
    ],
    suppliers: [
      {
        id: sup.mill, name: "Northern Mills", description: "Flour supplier", websiteUrl: "https://mills.example", status: "Approved", market: "Domestic", type: "Manufacturer",
        street1: "1 Mill Road", city: "Springfield", region: "IL", zipCode: "62701", country: "US", products: [prod.flour], parents: [sup.group],
        attributes: {
          "Account Manager": "Ana Alvarez", "Credit Limit": 50000, "Approved On": "2023-06-15", "Last Audit": "2024-04-02T09:30:00Z",
          Certificates: [doc.cert, doc.haccp], Contract: doc.sop, Risk: "low", Regions: ["us-midwest", "ca-east"], Organic: true,
          Portal: "https://portal.mills.example", "Quality Email": "qa@mills.example", Hotline: "+1 800 555 0199",
          "Row Index": "R-7", name: "Northern Mills Co.", [LONG_ATTRIBUTE_KEY]: "ACC-2024-0001",
        },
      },
      {
        id: sup.sweet, name: "Sweet, Sugar & Co", status: "Pending", market: "Import", type: "Distributor", country: "BR", products: [prod.sugar, prod.discontinued], parents: [sup.group],
        attributes: { "Credit Limit": "n/a", "Approved On": "2024-02-30", "Last Audit": "last tuesday", Risk: "high", Regions: ["latam"], Organic: "yes", Certificates: [] },
      },
      { id: sup.pack, name: "PackRight", status: "Approved", products: [prod.box], attributes: { "Credit Limit": 1200.5, Regions: [] } },
      { id: sup.group, name: "Global Ingredients Group", status: "Approved", type: "Holding" },
    ],
    customers: [
      { id: id("customer:grocer"), name: "Corner Grocer", phoneNumber: "+44 20 7946 0000", city: "London", country: "GB", contactFirstName: "Grace", contactLastName: "Green", contactEmail: "grace@grocer.example", products: [prod.bread], attributes: { Tier: "gold" } },
      { id: id("customer:cafe"), name: "Café Lumière", city: "Lyon", country: "FR", products: [prod.bread, prod.dough] },
      { id: id("customer:anon"), name: "Walk-in Customers", description: "No contact on file" },
    ],
    areas: [
      { id: area.north, name: "Production Floor", type: "Floor", size: 1200, sizeUnit: "m2", siteId: site.north, attributes: { "Hygiene Zone": "High care" } },
      { id: area.mixing, name: "Mixing Room", type: "Room", size: 80.5, sizeUnit: "m2", parentId: area.north, siteId: site.north },
      { id: area.oven, name: "Oven Bay", type: "Zone", parentId: area.mixing, siteId: site.line1 },
      { id: area.store, name: "Dry Store", type: "Room", siteId: site.south },
    ],
    equipment: [
      { id: id("equipment:mixer"), name: "Spiral Mixer", make: "Kemper", model: "SP 125", serialNumber: "KM-88812", siteId: site.north, areaId: area.mixing, attributes: { "Calibrated On": "2024-01-10" } },
      { id: id("equipment:oven"), name: "Deck Oven", make: "Wachtel", model: "Piccolo", siteId: site.line1, areaId: area.oven, attributes: { "Calibrated On": "soon" } },
      { id: id("equipment:scale"), name: "Floor Scale", siteId: site.south },
    ],
    chemicals: [
      { id: id("chemical:sanitizer"), name: "Quat Sanitizer", type: "Sanitizer", grade: "Food", productionMethod: "Synthetic", sites: [site.north, site.south], attributes: { Concentration: 0.2 } },
      { id: id("chemical:degreaser"), name: "Alkaline Degreaser", type: "Detergent", sites: [site.north], attributes: { Concentration: "strong" } },
    ],
    lots: [
      { id: id("lot:flour-1"), code: "L-FL-0001", status: "Released", quantity: 1000, unit: "kg", expiryDate: "2025-06-30", dateReceived: "2024-05-02", productId: prod.flour, siteId: site.north, attributes: { "Released At": "2024-05-03T14:00:00+02:00", Temperature: 18.5, "On Hold": false, status: "OK" } },
      { id: id("lot:sugar-1"), code: "L-SU-0001", status: "OnHold", quantity: 500, unit: "kg", dateReceived: "2024-05-10", productId: prod.sugar, siteId: site.south, attributes: { Temperature: "n/a", "On Hold": true, "Released At": "2024-13-01T00:00:00Z" } },
      { id: id("lot:bread-1"), code: "L-BR-0420", status: "Produced", quantity: 240, unit: "loaves", dateProduced: "2024-05-20", expiryDate: "2024-05-25", productId: prod.bread, siteId: site.line1 },
      // Points at a product and a site that no longer exist: their names export empty, the ids stay.
      { id: id("lot:legacy"), code: "L-OLD-0007", description: "From the old warehouse", status: "Released", quantity: 12, unit: "cases", productId: prod.discontinued, siteId: site.old },
    ],
    recipes: [
      { id: id("recipe:sourdough"), name: "Sourdough", status: "Published", outputQuantity: 240, outputUnit: "loaves", outputProductId: prod.bread, attributes: { Yield: 96.5 } },
      { id: id("recipe:dough"), name: "Base Dough", status: "Draft", hasUnpublishedChanges: true, outputQuantity: 100, outputUnit: "kg", outputProductId: prod.dough },
    ],
    forms: [
      {
        id: form.temp,
        name: "Temperature Check",
        recordPrefix: "TC",
        fields: [
          { id: f("temp:heading"), key: "heading", label: "Cold chain", type: "heading" },
          { id: f("temp:unit"), key: "unit_name", label: "Unit", type: "text" },
          { id: f("temp:temperature"), key: "temperature", label: "Temperature (°C)", type: "number", requiresVerification: true },
          { id: f("temp:ok"), key: "within_limits", label: "Within limits?", type: "yesNo" },
          { id: f("temp:date"), key: "check_date", label: "Check date", type: "date" },
          { id: f("temp:time"), key: "check_time", label: "Check time", type: "time" },
          { id: f("temp:at"), key: "measured_at_local", label: "Measured at", type: "dateTime" },
          { id: f("temp:notes"), key: "notes", label: "Notes", type: "paragraph" },
          { id: f("temp:email"), key: "escalation_email", label: "Escalation email", type: "email" },
          { id: f("temp:phone"), key: "escalation_phone", label: "Escalation phone", type: "phone" },
          { id: f("temp:howto"), key: "howto", label: "Probe the centre of the product", type: "instructions" },
        ],
      },
      {
        id: form.audit,
        name: "Supplier Audit",
        recordPrefix: "SA",
        fields: [
          { id: f("audit:supplier"), key: "supplier", label: "Supplier", type: "resourceSelect", resourceKind: "suppliers" },
          { id: f("audit:lot"), key: "lot", label: "Lot sampled", type: "resourceSelect", resourceKind: "lots" },
          { id: f("audit:result"), key: "result", label: "Result", type: "select", options: [{ key: "pass", label: "Pass" }, { key: "minor", label: "Minor findings" }, { key: "fail", label: "Fail" }] },
          { id: f("audit:scope"), key: "scope", label: "Scope", type: "checkboxGroup", options: [{ key: "haccp", label: "HACCP" }, { key: "allergens", label: "Allergens" }, { key: "traceability", label: "Traceability" }] },
          {
            id: f("audit:survey"), key: "hygiene", label: "Hygiene", type: "survey",
            questions: [{ key: "floors", label: "Floors clean" }, { key: "pests", label: "No pest activity" }],
            options: [{ key: "yes", label: "Yes" }, { key: "no", label: "No" }, { key: "na", label: "N/A" }],
          },
          { id: f("audit:signature"), key: "auditor_signature", label: "Auditor", type: "signature", requiresVerification: true },
          { id: f("audit:attachments"), key: "attachments", label: "Attachments", type: "attachment" },
          { id: f("audit:photos"), key: "photos", label: "Photos", type: "photo" },
          {
            id: f("audit:findings"), key: "findings", label: "Findings", type: "grid",
            fields: [
              { id: f("audit:findings:area"), key: "area", label: "Area", type: "text" },
              { id: f("audit:findings:severity"), key: "severity", label: "Severity", type: "select", options: [{ key: "low", label: "Low" }, { key: "high", label: "High" }] },
              { id: f("audit:findings:due"), key: "due", label: "Due", type: "date" },
              {
                id: f("audit:findings:actions"), key: "actions", label: "Actions", type: "grid",
                fields: [
                  { id: f("audit:findings:actions:what"), key: "what", label: "What", type: "text" },
                  { id: f("audit:findings:actions:done"), key: "done", label: "Done", type: "yesNo" },
                  { id: f("audit:findings:actions:owner"), key: "owner", label: "Owner", type: "resourceSelect", resourceKind: "employees" },
                ],
              },
            ],
          },
        ],
      },
      {
        id: form.retired,
        name: "Pest Sighting (retired)",
        recordPrefix: "PS",
        deleted: true,
        fields: [{ id: f("retired:where"), key: "where", label: "Where", type: "text" }],
      },
    ],
    submissions: [
      {
        id: sub(1), formId: form.temp, siteId: site.north, status: "Completed", startedAt: "2024-05-20T13:58:00Z", completedAt: "2024-05-20T14:02:30.123456Z",
        values: { unit_name: "Walk-in chiller 1", temperature: 3.5, within_limits: true, check_date: "2024-05-20", check_time: "09:00", measured_at_local: "2024-05-20T14:00:00Z", notes: "All good,\nno issues", escalation_email: "qa@demo-foods.example", escalation_phone: "+1 312 555 0100" },
        verifications: { temperature: "2024-05-20T15:00:00Z" },
        steps: steps(1, "Completed", "Completed"),
      },
      {
        id: sub(2), formId: form.temp, siteId: site.south, status: "Completed", startedAt: "2024-05-21T06:00:00Z", completedAt: "2024-05-21T06:05:00Z",
        values: { unit_name: "Blast freezer", temperature: -12, within_limits: false, notes: "Door left open" },
        steps: steps(2, "Completed", "Pending"),
      },
      { id: sub(3), formId: form.temp, siteId: site.line1, status: "InProgress", startedAt: "2024-05-22T07:00:00Z", values: { unit_name: "Proofer" }, steps: steps(3, "InProgress", "Pending") },
      { id: sub(4), formId: form.temp, siteId: site.north, status: "Cancelled", archived: true, values: {}, steps: steps(4, "Pending", "Skipped") },
      {
        id: sub(5), formId: form.audit, siteId: site.north, status: "Completed", startedAt: "2024-05-18T08:00:00Z", completedAt: "2024-05-18T11:45:00Z",
        values: {
          supplier: { id: sup.mill }, lot: { id: id("lot:flour-1") }, result: "minor", scope: ["haccp", "traceability"], hygiene: { floors: "yes", pests: "no" },
          auditor_signature: { name: "Ana Alvarez", date: "2024-05-18T11:44:00Z" }, attachments: ["report.pdf", "checklist, signed.pdf"], photos: ["IMG_0001.jpg"],
          findings: [
            { area: "Intake", severity: "high", due: "2024-06-01", actions: [{ what: "Repair door seal", done: false, owner: { id: emp.ben } }, { what: "Retrain staff", done: true }] },
            { area: "Storage", severity: "low", actions: [] },
            { area: "Dock", actions: [{ what: "Replace pallet", done: true, owner: { id: emp.chloe } }] },
          ],
        },
        verifications: { auditor_signature: "2024-05-18T12:00:00Z" },
        steps: steps(5, "Completed", "Completed"),
      },
      {
        id: sub(6), formId: form.audit, siteId: site.south, status: "Completed", completedAt: "2024-05-19T10:00:00Z",
        values: { supplier: { id: sup.sweet }, result: "pass", scope: [], findings: [] },
        steps: steps(6, "Completed", "Completed"),
      },
      { id: sub(7), formId: form.audit, siteId: site.south, status: "InProgress", values: { result: "fail" }, steps: steps(7, "InProgress", "Pending") },
      { id: sub(8), formId: form.retired, siteId: site.hq, status: "Completed", completedAt: "2023-11-02T12:00:00Z", values: { where: "Loading bay" }, steps: steps(8, "Completed", "Skipped") },
    ],
    deviations: [
      { id: id("deviation:open"), submissionId: sub(2), stepId: step(2, "record"), severity: "High", status: "Open", fieldKey: "temperature", fieldLabel: "Temperature (°C)", displayValue: "-12", assignedUserId: emp.ana, comment: "Check the freezer door" },
      { id: id("deviation:in-progress"), submissionId: sub(2), stepId: step(2, "record"), severity: "Medium", status: "InProgress", fieldKey: "within_limits", fieldLabel: "Within limits?", displayValue: "No", assignedTeamId: team.maintenance, linkedRecordId: sub(3) },
      { id: id("deviation:comment-signed"), submissionId: sub(5), stepId: step(5, "record"), severity: "Critical", status: "Resolved", resolutionType: "Comment", fieldKey: "severity", fieldLabel: "Severity", displayValue: "High", rowId: "findings:1", assignedUserId: emp.ben, assignedTeamId: team.production, supplierId: sup.mill, resolutionComment: "Seal replaced, verified", resolvedById: emp.ana, resolvedAt: "2024-05-19T09:15:00Z", signedById: emp.ana, signedAt: "2024-05-19T09:16:30Z" },
      { id: id("deviation:comment-unsigned"), submissionId: sub(5), stepId: step(5, "record"), severity: "Low", status: "Resolved", resolutionType: "Comment", fieldKey: "result", fieldLabel: "Result", displayValue: "Minor findings", assignedTeamId: team.qa, supplierId: sup.mill, resolutionComment: "Accepted as minor", resolvedById: emp.chloe, resolvedAt: "2024-05-19T10:00:00Z" },
      { id: id("deviation:linked"), submissionId: sub(6), stepId: step(6, "record"), severity: "Medium", status: "Resolved", resolutionType: "LinkedResolutionRecord", fieldKey: "result", fieldLabel: "Result", displayValue: "Pass", assignedUserId: emp.dev, supplierId: sup.sweet, linkedRecordId: sub(1), linkedResolutionComment: "Re-checked in TC", resolvedById: emp.ben, resolvedAt: "2024-05-20T14:03:00Z" },
      // Assigned to a person whose employee record was deleted: assigned_to falls back to the team.
      { id: id("deviation:former-assignee"), submissionId: sub(1), stepId: step(1, "record"), severity: "Low", status: "Open", fieldKey: "notes", fieldLabel: "Notes", displayValue: "All good, no issues", assignedUserId: emp.former, assignedTeamId: team.qa },
    ],
    delete: {
      employees: [emp.former],
      sites: [site.old],
      products: [prod.discontinued],
    },
  };
}

export interface SeedDemoResult {
  organizationId: string;
  keyId: string;
  /** Present only when this call issued the key. */
  secret?: string;
}

/**
 * Creates the demo organization (enabled), loads the demo data and issues a demo key unless an
 * active one exists. Safe to run on every start: a second run changes nothing.
 */
export async function seedDemo(pool: Pool, opts: { keyHashSecret: string; organizationId?: string }): Promise<SeedDemoResult> {
  const organizationId = opts.organizationId ?? DEMO_ORGANIZATION_ID;
  const org = await createOrganization(pool, { id: organizationId, name: DEMO_ORGANIZATION_NAME, enable: true });
  if (org.created) await applyDocument(pool, demoHistoryDocument(organizationId));
  await applyDocument(pool, demoDocument(organizationId));
  const connectionString = pool.options.connectionString;
  if (!connectionString) throw new Error("seedDemo needs a pool created from a connection string");
  const orm = await createOrm(connectionString, 1);
  try {
    const active = (await listKeys(orm, { organizationId })).find((k) => k.state === "active" && k.description === "demo key");
    if (active) return { organizationId, keyId: active.keyId };
    const issued = await issueKey(orm, { organizationId, description: "demo key", keyHashSecret: opts.keyHashSecret });
    return { organizationId, keyId: issued.keyId, secret: issued.secret };
  } finally {
    await orm.close(true);
  }
}
