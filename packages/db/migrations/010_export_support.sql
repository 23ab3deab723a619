-- Support for the export service (owned by services/export; see docs/export.md and docs/cursor.md).

-- Wall-clock text of an instant in a site's time zone (localDateTime columns read live, e.g. the
-- `_local` columns of deviations). A blank or unknown zone gives NULL (an empty cell) rather than
-- failing the whole page.
CREATE FUNCTION export_local_text(ts timestamptz, zone text) RETURNS text LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  IF ts IS NULL OR zone IS NULL OR btrim(zone) = '' THEN RETURN NULL; END IF;
  RETURN (ts AT TIME ZONE zone)::text;
EXCEPTION WHEN invalid_parameter_value THEN RETURN NULL;
END $$;

-- Row shapes a dataset had before its current one. A cursor is bound to (dataset key, shape
-- fingerprint); this history lets the export tell "dataset reshaped since issue" apart from
-- "cursor altered". Filled by a trigger, whoever rewrites the registry.
CREATE TABLE dataset_shape_history (
  organization_id uuid NOT NULL,
  dataset_key text NOT NULL,
  shape_fingerprint text NOT NULL,
  replaced_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, dataset_key, shape_fingerprint)
);

CREATE FUNCTION record_dataset_shape_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO dataset_shape_history (organization_id, dataset_key, shape_fingerprint)
    VALUES (OLD.organization_id, OLD.key, OLD.shape_fingerprint)
    ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;

CREATE TRIGGER dataset_registry_shape_history_upd AFTER UPDATE OF shape_fingerprint ON dataset_registry
  FOR EACH ROW WHEN (OLD.shape_fingerprint IS DISTINCT FROM NEW.shape_fingerprint)
  EXECUTE FUNCTION record_dataset_shape_history();
CREATE TRIGGER dataset_registry_shape_history_del AFTER DELETE ON dataset_registry
  FOR EACH ROW EXECUTE FUNCTION record_dataset_shape_history();
