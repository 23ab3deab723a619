-- Visibility horizon held by writers only, scoped by declared organization, and a changeToken that
-- never runs ahead of the CSV (issue 18; docs/export.md "Visibility horizon", docs/catalog.md).

-- 1. A live last_modified is stamped no earlier than the moment its writer holds a transaction id.
--    The horizon only counts sessions that hold one (pg_stat_activity.backend_xid), so a stamp taken
--    earlier (now() is the transaction's start, which can be long before its first write) could fall
--    behind a horizon computed while the writer still looked like a reader. The first live stamp of a
--    transaction assigns the xid, then reads the clock once; every live stamp of the transaction that
--    is earlier is lifted to that instant (one value per transaction, so rows written together keep
--    sharing a position). Stamps before the transaction's start (a backfill's explicit lastModified)
--    are left alone: they are outside the no-miss guarantee, as documented.
CREATE FUNCTION export_stamp_after_xid() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  held_since timestamptz;
BEGIN
  IF NEW.last_modified >= transaction_timestamp() THEN
    held_since := nullif(current_setting('exportsvc.xid_held_since', true), '')::timestamptz;
    IF held_since IS NULL THEN
      PERFORM pg_current_xact_id();
      held_since := clock_timestamp();
      PERFORM set_config('exportsvc.xid_held_since', held_since::text, true);
    END IF;
    IF NEW.last_modified < held_since THEN
      NEW.last_modified := held_since;
    END IF;
  END IF;
  RETURN NEW;
END $$;

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['suppliers', 'customers', 'products', 'product_categories', 'equipment', 'chemicals',
                           'employees', 'areas', 'lots', 'recipes', 'documents', 'deviations', 'submissions']
  LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE INSERT ON %I FOR EACH ROW EXECUTE FUNCTION export_stamp_after_xid()', t || '_stamp_ins', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE ON %I FOR EACH ROW WHEN (NEW.last_modified IS DISTINCT FROM OLD.last_modified) EXECUTE FUNCTION export_stamp_after_xid()', t || '_stamp_upd', t);
  END LOOP;
END $$;

-- 2. dataset_changes.settles_at: the instant from which every row counted so far is at or before
--    its own stamp, i.e. servable once the visibility horizon passes it. A change's rows are stamped
--    before its counter moves (the bump is an AFTER trigger), so the bump's clock bounds them, except
--    rows stamped in the future, whose own stamp is taken. The catalog marks a token as held while
--    settles_at is not yet before the horizon, so the token moves again when the rows become servable.
ALTER TABLE dataset_changes ADD COLUMN settles_at timestamptz;
UPDATE dataset_changes SET settles_at = changed_at;
ALTER TABLE dataset_changes ALTER COLUMN settles_at SET DEFAULT clock_timestamp(), ALTER COLUMN settles_at SET NOT NULL;

CREATE OR REPLACE FUNCTION bump_dataset_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at, settles_at)
      SELECT o.organization_id, TG_ARGV[0], 1, clock_timestamp(), clock_timestamp() FROM (SELECT DISTINCT organization_id FROM old_rows) o
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at,
        settles_at = greatest(dataset_changes.settles_at, excluded.settles_at);
  ELSE
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at, settles_at)
      SELECT o.organization_id, TG_ARGV[0], 1, clock_timestamp(), greatest(clock_timestamp(), o.newest)
        FROM (SELECT organization_id, max(last_modified) AS newest FROM new_rows GROUP BY organization_id) o
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at,
        settles_at = greatest(dataset_changes.settles_at, excluded.settles_at);
  END IF;
  RETURN NULL;
END $$;

-- 3. form_dataset_changes.source_last_modified: the submission's stamp as logged, so the horizon of
--    a form dataset (the oldest pending change) is one index probe instead of a join over every
--    pending change. A later edit of the same submission logs its own (newer) stamp; holding at the
--    older one until both are applied is conservative. Deletions log NULL: they produce no row.
ALTER TABLE form_dataset_changes ADD COLUMN source_last_modified timestamptz;
UPDATE form_dataset_changes c SET source_last_modified = s.last_modified
  FROM submissions s
 WHERE c.kind = 'submission' AND s.organization_id = c.organization_id AND s.id = c.submission_id;
CREATE INDEX form_dataset_changes_pending_stamp ON form_dataset_changes (organization_id, form_id, source_last_modified)
  WHERE kind = 'submission' AND source_last_modified IS NOT NULL;

CREATE OR REPLACE FUNCTION form_ds.log_submission_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id, source_last_modified)
      SELECT organization_id, 'submission', form_id, id, last_modified FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id)
      SELECT organization_id, 'submission', form_id, id FROM old_rows;
  ELSE
    -- A submission moved to another form is logged for both forms; unchanged rows are not logged.
    INSERT INTO form_dataset_changes (organization_id, kind, form_id, submission_id, source_last_modified)
      SELECT n.organization_id, 'submission', n.form_id, n.id, n.last_modified
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE o IS DISTINCT FROM n
      UNION
      SELECT o.organization_id, 'submission', o.form_id, o.id, NULL
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE o.form_id IS DISTINCT FROM n.form_id;
  END IF;
  PERFORM pg_notify('form_dataset_changes', '');
  RETURN NULL;
END $$;

-- 4. The session part of an organization's visibility horizon never goes back. Any horizon once
--    computed stays safe (every row stamped before it had committed when it was computed), but a
--    reader that later writes shows an xact_start from before its first write, so a fresh
--    computation can be lower. The catalog raises this floor before it answers with tokens that
--    promise rows as settled; pages never use less, so a token never promises what a page then holds
--    back.
CREATE TABLE export_visibility_floors (
  organization_id uuid PRIMARY KEY,
  horizon timestamptz NOT NULL
);
