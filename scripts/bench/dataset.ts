import type { Pool } from "pg";
import { FIXED_DATASETS_BY_KEY, attributeDataType, shapeFingerprint, type AttributeType, type ColumnSpec } from "@exportsvc/datasets";

export const BENCH_DATASET = "resources_suppliers";

const ATTRIBUTES: Array<{ id: string; key: string; type: AttributeType }> = [
  { id: "00000000-0000-4000-8000-00000000a001", key: "annual_volume", type: "Number" },
  { id: "00000000-0000-4000-8000-00000000a002", key: "audit_date", type: "Date" },
  { id: "00000000-0000-4000-8000-00000000a003", key: "risk_level", type: "Select" },
  { id: "00000000-0000-4000-8000-00000000a004", key: "certifications", type: "MultiSelect" },
  { id: "00000000-0000-4000-8000-00000000a005", key: "notes", type: "Text" },
];

/**
 * Generates `rows` suppliers of one organization with SQL (custom attributes, product links,
 * runs of equal last_modified) and registers resources_suppliers the way the schema service does.
 */
/** Makes the generated suppliers' visibility map and statistics current (index-only scans, plans). */
export const SUPPLIER_TABLES_VACUUM = "VACUUM ANALYZE suppliers, supplier_products, products";

export async function generateSuppliers(
  pool: Pool,
  organizationId: string,
  rows: number,
  log: (m: string) => void,
  /** VACUUM ANALYZE the tables afterwards (default true); a caller generating many organizations does it once at the end. */
  { vacuum = true }: { vacuum?: boolean } = {},
): Promise<ColumnSpec[]> {
  const started = Date.now();
  await pool.query(`INSERT INTO organizations (id, name) VALUES ($1, 'Bench org') ON CONFLICT DO NOTHING`, [organizationId]);
  await pool.query(`INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true) ON CONFLICT DO NOTHING`, [organizationId]);
  const existing = Number((await pool.query(`SELECT count(*) FROM suppliers WHERE organization_id = $1`, [organizationId])).rows[0].count);
  if (existing !== rows) {
    await pool.query(`DELETE FROM supplier_products WHERE organization_id = $1`, [organizationId]);
    await pool.query(`DELETE FROM suppliers WHERE organization_id = $1`, [organizationId]);
    await pool.query(`DELETE FROM products WHERE organization_id = $1`, [organizationId]);
    await pool.query(`DELETE FROM custom_attribute_definitions WHERE organization_id = $1`, [organizationId]);
    for (const [i, a] of ATTRIBUTES.entries()) {
      await pool.query(
        `INSERT INTO custom_attribute_definitions (organization_id, id, resource_kind, key, name, type, position) VALUES ($1,$2,'suppliers',$3,$3,$4,$5)`,
        [organizationId, a.id, a.key, a.type, i],
      );
    }
    await pool.query(
      `INSERT INTO products (organization_id, id, name) SELECT $1, gen_random_uuid(), 'Product ' || g FROM generate_series(1, 1000) g`,
      [organizationId],
    );
    const attrs = ATTRIBUTES.map((a) => a.id);
    await pool.query(
      `INSERT INTO suppliers (organization_id, id, name, description, website_url, status, market, type, street1, city, region, zip_code, country, attributes, last_modified)
       SELECT $1, gen_random_uuid(), 'Supplier ' || g, 'Supplies ' || md5(g::text), 'https://supplier' || g || '.example.com',
              (ARRAY['Approved','Pending','Rejected'])[1 + g % 3], 'EU', 'Manufacturer', g || ' Main Street', 'Utrecht', 'UT', '35' || (g % 100),
              'NL',
              jsonb_build_object($2::text, (g % 9973) || '.5', $3::text, '2024-0' || (1 + g % 9) || '-1' || (g % 10),
                                 $4::text, 'level_' || (g % 4), $5::text, jsonb_build_array('iso' || (g % 7), 'brc', 'haccp'),
                                 $6::text, CASE WHEN g % 10 = 0 THEN 'needs, "quoting"' ELSE 'ok' END),
              timestamptz '2024-01-01 00:00:00+00' + ((g / 3) * interval '1 second')
         FROM generate_series(1, $7::int) g`,
      [organizationId, ...attrs, rows],
    );
    await pool.query(
      `INSERT INTO supplier_products (organization_id, supplier_id, product_id)
       SELECT s.organization_id, s.id, p.id
         FROM (SELECT organization_id, id, row_number() OVER () AS n FROM suppliers WHERE organization_id = $1) s
         JOIN (SELECT id, row_number() OVER () AS n FROM products WHERE organization_id = $1) p ON p.n = 1 + s.n % 1000
        WHERE s.n % 4 = 0`,
      [organizationId],
    );
    if (vacuum) await pool.query(SUPPLIER_TABLES_VACUUM);
    log(`generated ${rows} suppliers in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } else {
    log(`reusing ${rows} suppliers`);
  }

  const definition = FIXED_DATASETS_BY_KEY.get(BENCH_DATASET)!;
  const columns: ColumnSpec[] = [
    ...definition.coreColumns.map((c) => ({ ...c, source: { kind: "core" as const, name: c.key } })),
    ...ATTRIBUTES.map((a) => ({
      key: a.key,
      dataType: attributeDataType(a.type),
      label: a.key,
      source: { kind: "attribute" as const, attributeId: a.id, attributeType: a.type },
    })),
  ];
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, columns, shape_fingerprint)
     VALUES ($1, $2, 'resource', 'suppliers', $3, $4)
     ON CONFLICT (organization_id, key) DO UPDATE SET columns = excluded.columns, shape_fingerprint = excluded.shape_fingerprint, state = 'ready'`,
    [organizationId, BENCH_DATASET, JSON.stringify(columns), shapeFingerprint(columns)],
  );
  await pool.query(`DELETE FROM registry_sync_queue WHERE organization_id = $1`, [organizationId]);
  return columns;
}

/**
 * One deviation per submission of the organization (up to `rows`), generated with SQL: an assigned
 * employee or team, a supplier, every third resolved (by comment, signed, or by a linked record),
 * created and modified in runs of equal stamps; registers `deviations` as the schema service does
 * (its core columns). The submissions must exist already (the form of scripts/bench/form-pages.ts).
 */
export async function generateDeviations(pool: Pool, organizationId: string, rows: number, log: (m: string) => void): Promise<ColumnSpec[]> {
  const started = Date.now();
  await pool.query(`DELETE FROM deviations WHERE organization_id = $1`, [organizationId]);
  await pool.query(
    `INSERT INTO employees (organization_id, id, first_name, last_name, job_title)
     SELECT $1, gen_random_uuid(), 'First' || g, 'Last' || g, 'Inspector' FROM generate_series(1, 200) g`,
    [organizationId],
  );
  await pool.query(`INSERT INTO teams (organization_id, id, name) SELECT $1, gen_random_uuid(), 'Team ' || g FROM generate_series(1, 20) g`, [organizationId]);
  await pool.query(
    `WITH s AS (SELECT id, row_number() OVER (ORDER BY last_modified, id)::int AS n FROM submissions WHERE organization_id = $1 LIMIT $2),
          ids AS (SELECT (SELECT array_agg(id ORDER BY id) FROM employees WHERE organization_id = $1) AS e,
                         (SELECT array_agg(id ORDER BY id) FROM teams WHERE organization_id = $1) AS t,
                         (SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM suppliers WHERE organization_id = $1 LIMIT 1000) p) AS p,
                         (SELECT array_agg(id ORDER BY n) FROM s) AS s)
     INSERT INTO deviations (organization_id, id, code, submission_id, severity, status, resolution_type, field_key, field_label, display_value,
                             assigned_user_id, assigned_team_id, supplier_id, comment, resolution_comment, resolved_by_id, resolved_at,
                             signed_by_id, signed_at, linked_record_id, created_at, last_modified)
     SELECT $1, gen_random_uuid(), 'DEV-' || s.n, s.id, (ARRAY['Low','Medium','High','Critical'])[1 + s.n % 4],
            CASE WHEN s.n % 3 = 0 THEN 'Resolved' ELSE 'Open' END,
            CASE WHEN s.n % 3 = 0 THEN CASE WHEN s.n % 2 = 0 THEN 'Comment' ELSE 'LinkedResolutionRecord' END END,
            'temperature', 'Temperature', (s.n % 100) || '.5',
            CASE WHEN s.n % 5 <> 0 THEN ids.e[1 + s.n % cardinality(ids.e)] END,
            CASE WHEN s.n % 5 = 0 THEN ids.t[1 + s.n % cardinality(ids.t)] END,
            ids.p[1 + s.n % cardinality(ids.p)],
            'Out of range, "check"', CASE WHEN s.n % 3 = 0 THEN 'Fixed' END,
            CASE WHEN s.n % 3 = 0 THEN ids.e[1 + (s.n + 7) % cardinality(ids.e)] END,
            CASE WHEN s.n % 3 = 0 THEN ts END,
            CASE WHEN s.n % 6 = 0 THEN ids.e[1 + (s.n + 11) % cardinality(ids.e)] END,
            CASE WHEN s.n % 6 = 0 THEN ts END,
            CASE WHEN s.n % 6 = 3 THEN ids.s[1 + (s.n::bigint * 7) % cardinality(ids.s)] END,
            ts - interval '1 day', ts
       FROM s, ids, LATERAL (SELECT timestamptz '2024-06-01 00:00:00+00' + ((s.n / 3) * interval '1 second') AS ts) x`,
    [organizationId, rows],
  );
  await pool.query("VACUUM ANALYZE deviations, employees, teams");
  const definition = FIXED_DATASETS_BY_KEY.get("deviations")!;
  const columns: ColumnSpec[] = definition.coreColumns.map((c) => ({ ...c, source: { kind: "core" as const, name: c.key } }));
  await pool.query(
    `INSERT INTO dataset_registry (organization_id, key, kind, source_ref, columns, shape_fingerprint)
     VALUES ($1, 'deviations', 'deviations', 'deviations', $2, $3)
     ON CONFLICT (organization_id, key) DO UPDATE SET columns = excluded.columns, shape_fingerprint = excluded.shape_fingerprint, state = 'ready'`,
    [organizationId, JSON.stringify(columns), shapeFingerprint(columns)],
  );
  await pool.query(`DELETE FROM registry_sync_queue WHERE organization_id = $1`, [organizationId]);
  log(`generated ${rows} deviations in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return columns;
}
