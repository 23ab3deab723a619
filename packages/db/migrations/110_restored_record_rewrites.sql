-- A record that rows display by name, deleted and later written again under the same id (an undo, a
-- restore from a backup, an integration re-sending it), fills those names back in without the rows'
-- last_modified moving: a lot shows its product's name again, a product its supplier's. 046 bumps the
-- organization's rewrite counter on the delete (the names went empty); nothing bumped it on the
-- return, so a consumer that had re-read in between kept the empty names.
--
-- The ids of deleted displayed records are remembered per organization and table, and an insert of
-- one of them bumps the counter again (coarse, like 046) and forgets it. An insert statement costs
-- one join of its new rows with this small table; no index on the referencing columns is needed.
-- A delete costs one row here per deleted record (npm run bench:rewrites). Still not covered
-- (docs/api.md, "Rewrites"): a record created for the first time after rows that already name its id.
--
-- A plain insert per deleted row (no ON CONFLICT: its speculative insertion cost a bulk delete of
-- 200 000 products 0.4 s more); seq keeps the key unique if an id is ever remembered twice.
CREATE TABLE displayed_record_deletions (
  organization_id uuid NOT NULL,
  record_table text NOT NULL,
  id uuid NOT NULL,
  deleted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (organization_id, record_table, id, seq)
);

-- An organization being deleted leaves nothing here (its rows cascade from organizations, which is
-- gone by the time these statement triggers run; exportctl org delete sweeps the rest).
CREATE FUNCTION remember_displayed_record_deletions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO displayed_record_deletions (organization_id, record_table, id)
    SELECT o.organization_id, TG_TABLE_NAME, o.id FROM old_rows o
     WHERE EXISTS (SELECT 1 FROM organizations x WHERE x.id = o.organization_id);
  RETURN NULL;
END $$;

-- Deduplicated before the upsert (see 020 for why DISTINCT must not see clock_timestamp()).
CREATE FUNCTION bump_dataset_rewrites_on_restore() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH restored AS (
    DELETE FROM displayed_record_deletions d USING new_rows n
     WHERE d.organization_id = n.organization_id AND d.record_table = TG_TABLE_NAME AND d.id = n.id
    RETURNING d.organization_id)
  INSERT INTO dataset_rewrites (organization_id, version, changed_at)
    SELECT o.organization_id, 1, clock_timestamp() FROM (SELECT DISTINCT organization_id FROM restored) o
    ON CONFLICT (organization_id) DO UPDATE SET version = dataset_rewrites.version + 1, changed_at = excluded.changed_at;
  RETURN NULL;
END $$;

-- On the tables 046 watches (records whose name, path, time zone or version label other rows
-- display), found by its trigger function so that the list stays 046's alone.
DO $$
DECLARE
  t text;
BEGIN
  FOR t IN SELECT DISTINCT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
            WHERE g.tgfoid = 'bump_dataset_rewrites'::regproc AND NOT g.tgisinternal ORDER BY 1
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION remember_displayed_record_deletions()',
                   t || '_deletions_remembered', t);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites_on_restore()',
                   t || '_restore_rewrites', t);
  END LOOP;
END $$;
