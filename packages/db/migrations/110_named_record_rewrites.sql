-- A record that rows display by name can appear after rows that already name its id: a lot loaded
-- before its product, a product restored under its id after a delete (an undo, a restore from a
-- backup) while its lots kept the id. Those rows show an empty name, then the name, and their
-- last_modified does not move. 046 bumps the organization's rewrite counter when such a record is
-- renamed or deleted; this bumps it when one is inserted while a row already names it, so a consumer
-- that read the empty names knows a full re-read is due.
--
-- The references are the export's (packages/datasets/src/sql/resources.ts, deviations.ts; a form
-- dataset's site): for each named table, the columns of other tables that the export looks names up
-- by (documents and their versions are named by no other table). services/catalog/test/
-- rewrite-counters.test.ts derives the same list from the export's SQL and fails when they differ.
--
-- The cost is on inserts of named records only (rare next to the rows that name them): one
-- semi-join per referencing column and statement. Most referencing columns have no index, so a
-- probe reads the organization's rows of that table: a site insert reads its organization's
-- submissions once (47 ms beside 200 000; npm run bench:rewrites). Rows written by the inserting transaction itself are
-- not counted: consumers see them, and the record, only once it has committed. Coarse like 046: the
-- whole organization's tokens move.
-- The one statement that bumps the organization counter for a set of organizations (046 wrote it
-- inline; later triggers call this). Deduplicated first: see 020 for why DISTINCT must not see
-- clock_timestamp().
CREATE FUNCTION bump_organization_rewrites(organizations uuid[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO dataset_rewrites (organization_id, version, changed_at)
    SELECT o.organization_id, 1, clock_timestamp() FROM (SELECT DISTINCT u AS organization_id FROM unnest(organizations) u) o
    ON CONFLICT (organization_id) DO UPDATE SET version = dataset_rewrites.version + 1, changed_at = excluded.changed_at
$$;

CREATE FUNCTION bump_dataset_rewrites_when_named() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ref text;
  found uuid[];
  named uuid[] := '{}';
BEGIN
  FOREACH ref IN ARRAY TG_ARGV LOOP
    EXECUTE format(
      'SELECT array_agg(DISTINCT n.organization_id) FROM new_rows n
        WHERE n.organization_id <> ALL ($1)
          AND EXISTS (SELECT 1 FROM %I r WHERE r.organization_id = n.organization_id AND r.%I = n.id AND r.xmin <> pg_current_xact_id()::xid)',
      split_part(ref, '.', 1), split_part(ref, '.', 2))
      INTO found USING named;
    named := named || coalesce(found, '{}');
  END LOOP;
  PERFORM bump_organization_rewrites(named);
  RETURN NULL;
END $$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('sites', ARRAY['equipment.site_id', 'areas.site_id', 'lots.site_id', 'submissions.site_id',
                    'product_sites.site_id', 'chemical_sites.site_id', 'employee_sites.site_id', 'document_sites.site_id']),
    ('teams', ARRAY['employee_teams.team_id', 'document_teams.team_id', 'deviations.assigned_team_id']),
    ('employees', ARRAY['deviations.assigned_user_id', 'deviations.resolved_by_id', 'deviations.signed_by_id']),
    ('suppliers', ARRAY['supplier_products.supplier_id', 'supplier_parents.parent_supplier_id', 'deviations.supplier_id']),
    ('customers', ARRAY['customer_products.customer_id']),
    ('products', ARRAY['supplier_products.product_id', 'customer_products.product_id', 'lots.product_id', 'recipes.output_product_id']),
    ('product_categories', ARRAY['products.product_category_id', 'product_categories.parent_id']),
    ('areas', ARRAY['equipment.area_id', 'areas.parent_id'])) AS v(tbl, refs)
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites_when_named(%s)',
                   t.tbl || '_named_rewrites', t.tbl, (SELECT string_agg(quote_literal(r), ', ') FROM unnest(t.refs) r));
  END LOOP;
END $$;
