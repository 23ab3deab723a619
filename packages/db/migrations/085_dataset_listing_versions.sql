-- Issue 15 item 2: a 304 of GET /v1/datasets decided without building the listing.
-- dataset_listing_versions.version moves whenever anything the listing is built from moves: a
-- registry row (key, kind, names, columns, generation, state), a dataset's change counter or its
-- settles_at (dataset_changes), the organization's rewrite counter (dataset_rewrites). The listing's
-- ETag is derived from it whenever every listed dataset is settled (see services/catalog/src/listing.ts
-- and docs/catalog.md "A cheap 304"); the horizon-dependent part is checked separately at request time.
--
-- The bump is a deferred constraint trigger: it runs at commit, after everything else the
-- transaction did, so the one lock it takes on the organization's row is taken last and held only
-- for the commit. (An immediate bump would order that lock between the per-dataset counter locks
-- of concurrent writers of one organization and could deadlock them.)
CREATE TABLE dataset_listing_versions (
  organization_id uuid PRIMARY KEY,
  version bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION bump_dataset_listing_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    -- Deleting rows (an organization's deletion) never recreates the organization's version row.
    UPDATE dataset_listing_versions SET version = version + 1 WHERE organization_id = OLD.organization_id;
  ELSE
    -- Runs at commit: an organization deleted in this transaction (exportctl org delete, whose
    -- deletions write change counters) gets no version row back.
    INSERT INTO dataset_listing_versions AS v (organization_id, version)
      SELECT NEW.organization_id, 1 WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = NEW.organization_id)
      ON CONFLICT (organization_id) DO UPDATE SET version = v.version + 1;
  END IF;
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER dataset_registry_listing_version AFTER INSERT OR UPDATE OR DELETE ON dataset_registry
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_dataset_listing_version();
CREATE CONSTRAINT TRIGGER dataset_changes_listing_version AFTER INSERT OR UPDATE OR DELETE ON dataset_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_dataset_listing_version();
CREATE CONSTRAINT TRIGGER dataset_rewrites_listing_version AFTER INSERT OR UPDATE OR DELETE ON dataset_rewrites
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_dataset_listing_version();

-- The cheap check's "is any counted row not yet servable": the organization's latest settles_at, one probe.
CREATE INDEX dataset_changes_settles_at ON dataset_changes (organization_id, settles_at);

-- Existing organizations start with a version row, so their first cheap check finds one.
INSERT INTO dataset_listing_versions (organization_id, version)
  SELECT DISTINCT organization_id, 1 FROM dataset_registry ON CONFLICT DO NOTHING;
