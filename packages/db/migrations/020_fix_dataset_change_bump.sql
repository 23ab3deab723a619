-- 003's bump_dataset_changes() selected DISTINCT over (organization_id, dataset, 1, clock_timestamp()):
-- clock_timestamp() differs per row, so a statement touching several rows of one organization proposed
-- the same (organization_id, dataset) twice and failed with "ON CONFLICT DO UPDATE command cannot
-- affect row a second time". Deduplicate the organizations first.
CREATE OR REPLACE FUNCTION bump_dataset_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at)
      SELECT o.organization_id, TG_ARGV[0], 1, clock_timestamp() FROM (SELECT DISTINCT organization_id FROM old_rows) o
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at;
  ELSE
    INSERT INTO dataset_changes (organization_id, dataset, version, changed_at)
      SELECT o.organization_id, TG_ARGV[0], 1, clock_timestamp() FROM (SELECT DISTINCT organization_id FROM new_rows) o
      ON CONFLICT (organization_id, dataset) DO UPDATE SET version = dataset_changes.version + 1, changed_at = excluded.changed_at;
  END IF;
  RETURN NULL;
END $$;
