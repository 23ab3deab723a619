-- The deletion feed (GET /v1/datasets/{datasetKey}/deletions, docs/api.md "Deletions and rewrites").
--
-- A tombstone is written by a statement-level trigger on the source table, so it commits (or rolls
-- back) with the delete itself: no delete is ever missed and none is reported that did not happen.
-- One INSERT ... SELECT per statement over the transition table keeps a bulk delete cheap
-- (measured by scripts/bench/tombstones.ts).
--
-- scope names the feed a tombstone belongs to (tombstoneScope() in @exportsvc/datasets):
--   the resource table name (suppliers, ..., documents)  -> resources_<kind>
--   'deviations'                                         -> deviations (cascaded deletes included)
--   'form:<form id>'                                     -> the form's submission dataset and every grid dataset
-- Keyed by source, not by dataset key, so a renamed form's new keys keep the feed.
CREATE TABLE dataset_tombstones (
  organization_id uuid NOT NULL,
  scope text NOT NULL,
  id uuid NOT NULL,
  -- clock_timestamp() of the delete: later than the transaction start, so the visibility horizon
  -- (oldest open transaction) holds it back until it has committed.
  deleted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (organization_id, scope, deleted_at, id, seq)
);

-- Pruning walks deleted_at across organizations.
CREATE INDEX dataset_tombstones_prune ON dataset_tombstones (deleted_at);

-- The newest (deleted_at, id) pruned from each feed: a deletions cursor positioned before it has
-- missed tombstones and is answered 410 DELETIONS_CURSOR_EXPIRED. A cursor at or after it lost nothing,
-- however old (a quiet feed keeps its cursors valid).
CREATE TABLE dataset_tombstone_watermarks (
  organization_id uuid NOT NULL,
  scope text NOT NULL,
  pruned_through_at timestamptz NOT NULL,
  pruned_through_id uuid NOT NULL,
  PRIMARY KEY (organization_id, scope)
);

CREATE FUNCTION write_tombstones() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO dataset_tombstones (organization_id, scope, id)
    SELECT organization_id, TG_ARGV[0], id FROM old_rows;
  RETURN NULL;
END $$;

-- A submission leaves its form's datasets when it is deleted or moved to another form. A deleted form's
-- datasets are frozen (they keep exporting what they held), so nothing leaves them: no tombstone.
CREATE FUNCTION write_submission_tombstones() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO dataset_tombstones (organization_id, scope, id)
      SELECT o.organization_id, 'form:' || o.form_id::text, o.id
        FROM old_rows o
        JOIN forms f ON f.organization_id = o.organization_id AND f.id = o.form_id AND f.deleted_at IS NULL;
  ELSE
    INSERT INTO dataset_tombstones (organization_id, scope, id)
      SELECT o.organization_id, 'form:' || o.form_id::text, o.id
        FROM old_rows o
        JOIN new_rows n ON n.organization_id = o.organization_id AND n.id = o.id AND n.form_id IS DISTINCT FROM o.form_id
        JOIN forms f ON f.organization_id = o.organization_id AND f.id = o.form_id AND f.deleted_at IS NULL;
  END IF;
  RETURN NULL;
END $$;

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['suppliers', 'customers', 'products', 'product_categories', 'equipment', 'chemicals',
                           'employees', 'areas', 'lots', 'recipes', 'documents', 'deviations'] LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION write_tombstones(%L)',
                   t || '_tombstones', t, t);
  END LOOP;
END $$;

CREATE TRIGGER submissions_tombstones_del AFTER DELETE ON submissions
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION write_submission_tombstones();
CREATE TRIGGER submissions_tombstones_upd AFTER UPDATE ON submissions
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION write_submission_tombstones();
