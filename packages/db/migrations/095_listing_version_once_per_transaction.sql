-- Issue 15 item 2: the listing version (085) moves once per organization per transaction, not once
-- per row. The bump is a deferred row trigger; a transaction that wrote N registry or counter rows of
-- one organization ran N bumps at commit, each an UPDATE of the same version row, and every UPDATE
-- of a row this transaction already updated walks the row's growing chain of versions: quadratic
-- (100 000 registry rows in one statement took about three minutes at commit). One bump per
-- transaction is all a reader can tell apart: the transaction's changes become visible together, at
-- commit, with that bump.
--
-- bumped_by records the (64-bit, never wrapping) id of the transaction that last bumped the row;
-- deferred triggers run in the top-level transaction, so pg_current_xact_id() is that id. The rest
-- is 085's function unchanged.
ALTER TABLE dataset_listing_versions ADD COLUMN bumped_by xid8;

CREATE OR REPLACE FUNCTION bump_dataset_listing_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  organization uuid;
BEGIN
  IF TG_OP = 'DELETE' THEN
    organization := OLD.organization_id;
  ELSE
    organization := NEW.organization_id;
  END IF;
  IF EXISTS (SELECT 1 FROM dataset_listing_versions v WHERE v.organization_id = organization AND v.bumped_by = pg_current_xact_id()) THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    -- Deleting rows (an organization's deletion) never recreates the organization's version row.
    UPDATE dataset_listing_versions SET version = version + 1, bumped_by = pg_current_xact_id() WHERE organization_id = organization;
  ELSE
    -- Runs at commit: an organization deleted in this transaction (exportctl org delete, whose
    -- deletions write change counters) gets no version row back.
    INSERT INTO dataset_listing_versions AS v (organization_id, version, bumped_by)
      SELECT organization, 1, pg_current_xact_id() WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = organization)
      ON CONFLICT (organization_id) DO UPDATE SET version = v.version + 1, bumped_by = excluded.bumped_by;
  END IF;
  RETURN NULL;
END $$;
