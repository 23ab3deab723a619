-- Per-dataset rewrite counters beside the organization's (046). 046 counts renames and deletions of
-- records that rows display by name, for every dataset of the organization. Two rewrites escaped it
-- (found by the simulation, seed 27): rows that show a *relation* or a *borrowed column* of another
-- record whose writes do not touch the row itself.
--
--   resources_products.suppliers / .customers list the suppliers and customers linked through
--     supplier_products and customer_products. Those rows belong to the supplier or customer: a
--     supplier that restates its products changes the product's exported text, and the product's
--     last_modified does not move.
--   deviations show their submission's record_id, status, is_archived, site and form, their linked
--     record's record_id, status and form, their step's name and status, and the form's name. Those
--     records change without the deviation's last_modified moving.
--
-- A per-dataset counter moves only the token of the dataset whose rows changed, and only when they
-- may have: a submission's status change moves the deviations token only if a deviation shows that
-- submission, so routine submission edits do not send consumers into full re-reads. The listing's
-- rewriteToken includes a dataset's counter only once it is non-zero, so no token moves on deploy.
--
-- Lock order: like 046's, these bumps are immediate statement triggers. Applies of one organization
-- are serialized (exportctl apply's advisory lock); other writers that take a deviation's counter
-- rows in opposite orders can deadlock, as with 046 (docs/catalog.md "rewriteToken").
CREATE TABLE dataset_rewrite_counters (
  organization_id uuid NOT NULL,
  dataset text NOT NULL,
  version bigint NOT NULL DEFAULT 0,
  changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, dataset)
);

-- The listing version (085/095) moves with every row the listing is built from; this is one of them.
CREATE CONSTRAINT TRIGGER dataset_rewrite_counters_listing_version AFTER INSERT OR UPDATE OR DELETE ON dataset_rewrite_counters
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_dataset_listing_version();

-- The one statement that bumps a dataset's counter for a set of organizations (deduplicated first:
-- see 020 for why DISTINCT must not see clock_timestamp()). An organization being deleted gets no
-- counter back: exportctl org delete sweeps link tables (no foreign key to cascade them) after its
-- other tables, and their delete triggers land here.
CREATE FUNCTION bump_dataset_rewrite_counter(organizations uuid[], dataset text) RETURNS void LANGUAGE sql AS $$
  INSERT INTO dataset_rewrite_counters AS c (organization_id, dataset, version, changed_at)
    SELECT o.organization_id, dataset, 1, clock_timestamp() FROM (SELECT DISTINCT u AS organization_id FROM unnest(organizations) u) o
     WHERE EXISTS (SELECT 1 FROM organizations x WHERE x.id = o.organization_id)
    ON CONFLICT (organization_id, dataset) DO UPDATE SET version = c.version + 1, changed_at = excluded.changed_at
$$;

-- 1. Link tables whose rows another dataset lists from the far side. TG_ARGV[0]: that dataset.
--    Only rows that really came or went count: a writer that deletes and re-inserts the same pairs
--    still moves the token (safe, not precise); exportctl apply writes only the difference.
CREATE FUNCTION bump_dataset_rewrites_from_links() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(SELECT DISTINCT organization_id FROM new_rows), TG_ARGV[0]);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(SELECT DISTINCT organization_id FROM old_rows), TG_ARGV[0]);
  ELSE
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT organization_id FROM (SELECT * FROM new_rows EXCEPT SELECT * FROM old_rows) changed
      UNION SELECT organization_id FROM (SELECT * FROM old_rows EXCEPT SELECT * FROM new_rows) changed), TG_ARGV[0]);
  END IF;
  RETURN NULL;
END $$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES ('supplier_products', 'resources_products'), ('customer_products', 'resources_products')) AS v(tbl, dataset)
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites_from_links(%L)', t.tbl || '_rewrites_ins', t.tbl, t.dataset);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites_from_links(%L)', t.tbl || '_rewrites_upd', t.tbl, t.dataset);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bump_dataset_rewrites_from_links(%L)', t.tbl || '_rewrites_del', t.tbl, t.dataset);
  END LOOP;
END $$;

-- 2. Records whose columns deviations borrow. The probes below find the deviations that show a
--    changed record; without these indexes each would scan the organization's deviations (the first
--    one also serves the submission foreign key's cascade, which scanned them too).
CREATE INDEX IF NOT EXISTS deviations_submission ON deviations (organization_id, submission_id);
CREATE INDEX IF NOT EXISTS deviations_linked_record ON deviations (organization_id, linked_record_id) WHERE linked_record_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS deviations_step ON deviations (organization_id, step_id) WHERE step_id IS NOT NULL;

-- Submissions: record_id, status, is_archived, site_id and form_id are shown by the deviations of
-- the submission and by those linking to it. An inserted submission can only matter to a deviation
-- that already links to its id (no foreign key there); a deleted one to any that showed it (its own
-- deviations are deleted with it and get tombstones; the linking ones show empty cells from now on).
CREATE FUNCTION bump_deviation_rewrites_from_submissions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT n.organization_id FROM new_rows n
       WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.linked_record_id = n.id)), 'deviations');
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT o.organization_id FROM old_rows o
       WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = o.organization_id AND d.linked_record_id = o.id)), 'deviations');
  ELSE
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT n.organization_id
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE (o.record_id, o.status, o.is_archived, o.site_id, o.form_id) IS DISTINCT FROM (n.record_id, n.status, n.is_archived, n.site_id, n.form_id)
         AND (EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.submission_id = n.id)
              OR EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.linked_record_id = n.id))), 'deviations');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER submissions_deviation_rewrites_ins AFTER INSERT ON submissions REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_submissions();
CREATE TRIGGER submissions_deviation_rewrites_upd AFTER UPDATE ON submissions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_submissions();
CREATE TRIGGER submissions_deviation_rewrites_del AFTER DELETE ON submissions REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_submissions();

-- Steps: name and status, shown by the deviations raised on the step.
CREATE FUNCTION bump_deviation_rewrites_from_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT n.organization_id FROM new_rows n
       WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.step_id = n.id)), 'deviations');
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT o.organization_id FROM old_rows o
       WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = o.organization_id AND d.step_id = o.id)), 'deviations');
  ELSE
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT n.organization_id
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE (o.name, o.status) IS DISTINCT FROM (n.name, n.status)
         AND EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.step_id = n.id)), 'deviations');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER submission_steps_deviation_rewrites_ins AFTER INSERT ON submission_steps REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_steps();
CREATE TRIGGER submission_steps_deviation_rewrites_upd AFTER UPDATE ON submission_steps REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_steps();
CREATE TRIGGER submission_steps_deviation_rewrites_del AFTER DELETE ON submission_steps REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_steps();

-- Forms: the name is shown as workflow_name, form_name and linked_record_source. Renames are rare
-- and finding the deviations of a form's submissions is not one probe, so any deviation of the
-- organization is enough to move the token.
CREATE FUNCTION bump_deviation_rewrites_from_forms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT o.organization_id FROM old_rows o
       WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = o.organization_id)), 'deviations');
  ELSE
    PERFORM bump_dataset_rewrite_counter(ARRAY(
      SELECT DISTINCT n.organization_id
        FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
       WHERE o.name IS DISTINCT FROM n.name
         AND EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id)), 'deviations');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER forms_deviation_rewrites_upd AFTER UPDATE ON forms REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_forms();
CREATE TRIGGER forms_deviation_rewrites_del AFTER DELETE ON forms REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_rewrites_from_forms();
