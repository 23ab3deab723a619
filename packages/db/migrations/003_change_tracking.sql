-- Per-dataset change counters behind `changeToken` and the listing ETag. Statement-level triggers on
-- the tables that hold a dataset's own records bump the counter of every organization a statement
-- touched, so the token moves when, and only when, the dataset's own records change (deletions too).
CREATE TABLE dataset_changes (
  organization_id uuid NOT NULL,
  dataset text NOT NULL,
  version bigint NOT NULL DEFAULT 0,
  changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, dataset)
);

CREATE FUNCTION bump_dataset_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at)
      SELECT DISTINCT organization_id, TG_ARGV[0], 1, clock_timestamp() FROM old_rows
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at;
  ELSE
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at)
      SELECT DISTINCT organization_id, TG_ARGV[0], 1, clock_timestamp() FROM new_rows
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at;
  END IF;
  RETURN NULL;
END $$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('suppliers', 'resources_suppliers'), ('customers', 'resources_customers'), ('products', 'resources_products'),
    ('product_categories', 'resources_product_categories'), ('equipment', 'resources_equipment'),
    ('chemicals', 'resources_chemicals'), ('employees', 'resources_employees'), ('areas', 'resources_areas'),
    ('lots', 'resources_lots'), ('recipes', 'resources_recipes'), ('documents', 'resources_documents'),
    ('deviations', 'deviations')) AS v(tbl, dataset)
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_changes(%L)', t.tbl || '_changes_ins', t.tbl, t.dataset);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_changes(%L)', t.tbl || '_changes_upd', t.tbl, t.dataset);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_changes(%L)', t.tbl || '_changes_del', t.tbl, t.dataset);
  END LOOP;
END $$;

-- Value conversions used by export queries: a stored value that does not fit its type becomes NULL
-- (an empty cell) instead of failing the whole export.
CREATE FUNCTION export_try_numeric(v text) RETURNS numeric LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF v IS NULL OR v !~ '^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$' THEN RETURN NULL; END IF;
  RETURN v::numeric;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

CREATE FUNCTION export_try_date(v text) RETURNS date LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF v IS NULL OR v !~ '^\d{4}-\d{2}-\d{2}$' THEN RETURN NULL; END IF;
  RETURN v::date;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

-- Accepts ISO 8601 instants with an offset or Z; anything else (including a zone-less time) is NULL.
CREATE FUNCTION export_try_timestamptz(v text) RETURNS timestamptz LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  IF v IS NULL OR v !~ '^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|z|[-+]\d{2}(:?\d{2})?)$' THEN RETURN NULL; END IF;
  RETURN v::timestamptz;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

-- Plain decimal text: no exponent, integers without a fraction, trailing zeros dropped.
CREATE FUNCTION export_number_text(v numeric) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT trim_scale(v)::text
$$;
