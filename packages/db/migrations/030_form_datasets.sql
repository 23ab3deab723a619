-- Form datasets (packages/form-datasets, docs/form-datasets.md): materialized tables live in schema
-- form_ds; changes to submissions reach them through form_dataset_changes, written by triggers in the
-- same transaction as the source change and consumed by applyPendingChanges (schema service).

CREATE SCHEMA IF NOT EXISTS form_ds;

-- A uuid in its canonical text form, or NULL when the stored value is not a uuid (an empty cell
-- instead of a failed rebuild).
CREATE FUNCTION form_ds.try_uuid(v text) RETURNS uuid LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF v IS NULL OR v !~* '^\s*\{?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\}?\s*$' THEN RETURN NULL; END IF;
  RETURN btrim(v)::uuid;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

-- The change log. kind 'submission': re-render that submission's rows in its form's datasets
-- (insert, edit and delete alike); kind 'rebuild': rebuild the form's datasets (publish, rename,
-- a site's time zone fixed).
CREATE TABLE form_dataset_changes (
  organization_id uuid NOT NULL,
  seq bigserial NOT NULL,
  kind text NOT NULL CHECK (kind IN ('submission', 'rebuild')),
  form_id uuid NOT NULL,
  submission_id uuid,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, seq)
);
CREATE INDEX form_dataset_changes_order ON form_dataset_changes (seq);

CREATE FUNCTION form_ds.log_submission_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id)
      SELECT organization_id, 'submission', form_id, id FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id)
      SELECT organization_id, 'submission', form_id, id FROM old_rows;
  ELSE
    -- A submission moved to another form is logged for both forms; unchanged rows are not logged.
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id)
      SELECT n.organization_id, 'submission', n.form_id, n.id
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE o IS DISTINCT FROM n
      UNION
      SELECT o.organization_id, 'submission', o.form_id, o.id
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE o.form_id IS DISTINCT FROM n.form_id;
  END IF;
  PERFORM pg_notify('form_dataset_changes', '');
  RETURN NULL;
END $$;

CREATE TRIGGER submissions_form_ds_ins AFTER INSERT ON submissions
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION form_ds.log_submission_changes();
CREATE TRIGGER submissions_form_ds_upd AFTER UPDATE ON submissions
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION form_ds.log_submission_changes();
CREATE TRIGGER submissions_form_ds_del AFTER DELETE ON submissions
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION form_ds.log_submission_changes();

CREATE FUNCTION form_ds.request_rebuild(org uuid, form uuid) RETURNS void LANGUAGE sql AS $$
  INSERT INTO form_dataset_changes (organization_id, kind, form_id) VALUES (org, 'rebuild', form);
  SELECT pg_notify('form_dataset_changes', '');
$$;

-- Publishing (a version gets published_at, or a published version's fields change) rebuilds.
CREATE FUNCTION form_ds.on_form_version_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.published_at IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.published_at IS DISTINCT FROM NEW.published_at OR OLD.fields IS DISTINCT FROM NEW.fields) THEN
    PERFORM form_ds.request_rebuild(NEW.organization_id, NEW.form_id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER form_versions_form_ds AFTER INSERT OR UPDATE ON form_versions
  FOR EACH ROW EXECUTE FUNCTION form_ds.on_form_version_change();

-- A rename moves the dataset keys (and display names); deletion freezes, so needs nothing.
CREATE FUNCTION form_ds.on_form_rename() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM form_ds.request_rebuild(NEW.organization_id, NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER forms_form_ds_rename AFTER UPDATE OF name ON forms
  FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION form_ds.on_form_rename();

-- Fixing a site's time zone retries the rebuilds it blocked (forms whose datasets are failed).
CREATE FUNCTION form_ds.on_site_time_zone_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO form_dataset_changes (organization_id, kind, form_id)
    SELECT DISTINCT r.organization_id, 'rebuild', r.source_ref::uuid
      FROM dataset_registry r
     WHERE r.organization_id = NEW.organization_id AND r.kind = 'submission' AND r.state = 'failed';
  PERFORM pg_notify('form_dataset_changes', '');
  RETURN NULL;
END $$;
CREATE TRIGGER sites_form_ds_time_zone AFTER UPDATE OF time_zone ON sites
  FOR EACH ROW WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone) EXECUTE FUNCTION form_ds.on_site_time_zone_change();

-- What each materialized table was built from (the dataset plan: columns and how each renders), so
-- incremental maintenance re-renders rows with exactly the shape of the table it writes to, even
-- while a newer publish waits for its rebuild.
CREATE TABLE form_ds.dataset_tables (
  organization_id uuid NOT NULL,
  table_name text NOT NULL,
  dataset_key text NOT NULL,
  form_id uuid NOT NULL,
  plan jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, table_name)
);
