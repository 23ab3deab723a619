-- The listing's rewriteToken (docs/api.md, "Rewrites"): moves when rows' exported text may have
-- changed without their last_modified moving. Besides a dataset's own regeneration (generation), that
-- happens when a record whose name (or path, time zone, version label) other rows display is renamed
-- or deleted. One counter per organization, bumped by statement-level triggers on those tables when a
-- displayed column actually changes or a row is deleted: coarse (a site rename moves the token of
-- every dataset of the organization) but never missing a rewrite; renames are rare next to edits.
CREATE TABLE dataset_rewrites (
  organization_id uuid PRIMARY KEY,
  version bigint NOT NULL DEFAULT 0,
  changed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- TG_ARGV: the displayed columns of the table.
CREATE FUNCTION bump_dataset_rewrites() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO dataset_rewrites (organization_id, version, changed_at)
      SELECT o.organization_id, 1, clock_timestamp() FROM (SELECT DISTINCT organization_id FROM old_rows) o
      ON CONFLICT (organization_id) DO UPDATE SET version = dataset_rewrites.version + 1, changed_at = excluded.changed_at;
  ELSE
    INSERT INTO dataset_rewrites (organization_id, version, changed_at)
      SELECT o.organization_id, 1, clock_timestamp() FROM (
        SELECT DISTINCT o.organization_id
          FROM old_rows o JOIN new_rows n ON n.organization_id = o.organization_id AND n.id = o.id
         WHERE EXISTS (SELECT 1 FROM unnest(TG_ARGV) AS c(name) WHERE to_jsonb(o) -> c.name IS DISTINCT FROM to_jsonb(n) -> c.name)) o
      ON CONFLICT (organization_id) DO UPDATE SET version = dataset_rewrites.version + 1, changed_at = excluded.changed_at;
  END IF;
  RETURN NULL;
END $$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('sites', ARRAY['name', 'path', 'time_zone']),
    ('teams', ARRAY['name']),
    ('employees', ARRAY['first_name', 'last_name']),
    ('suppliers', ARRAY['name']),
    ('customers', ARRAY['name']),
    ('products', ARRAY['name']),
    ('product_categories', ARRAY['name']),
    ('areas', ARRAY['name', 'path']),
    ('documents', ARRAY['name']),
    ('document_versions', ARRAY['version_label', 'is_current_published'])) AS v(tbl, cols)
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites(%s)',
                   t.tbl || '_rewrites_upd', t.tbl, (SELECT string_agg(quote_literal(c), ', ') FROM unnest(t.cols) c));
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites()',
                   t.tbl || '_rewrites_del', t.tbl);
  END LOOP;
END $$;
