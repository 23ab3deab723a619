-- The rewrite feed (GET /v1/datasets/{datasetKey}/rewrites, docs/api.md "Deletions and rewrites").
--
-- 046, 105, 110 and 111 moved rewrite counters when a change rewrote exported text without moving
-- last_modified (a renamed, deleted or newly named related record; a relation or borrowed column; a
-- deviation's note), and every consumer re-read the dataset (046: every dataset of the organization)
-- in full. The rows such a change rewrites are knowable: they are the rows whose reference column
-- holds the changed record's id. The triggers now log the changed RECORD, one entry per record, in
-- the same transaction as the change; the feed expands an entry to the rows of its dataset that show
-- the record when it is read (packages/datasets/src/sql/rewrites-query.ts owns the references). So
-- the writer's cost does not grow with the rows that display the record (a site shown by a million
-- submissions costs one entry; npm run bench:rewrites). The counters no longer move for these
-- changes, so rewriteToken moves only for what the feed cannot express (a regeneration).
--
-- kind is what changed:
--   a named table (sites, teams, employees, suppliers, customers, products, product_categories,
--     areas, documents): the record was renamed (a displayed column changed), deleted, or inserted
--     under an id rows already name (110);
--   document_versions: a document's current version label (record_id: the document);
--   product_links: a product's supplier or customer links came or went (105; record_id: the product);
--   submissions, submission_steps, forms: a column a deviation borrows (105);
--   deviation_notes: a deviation's standalone comment written without a last_modified move (111).
CREATE TABLE dataset_rewrite_log (
  organization_id uuid NOT NULL,
  kind text NOT NULL,
  record_id uuid NOT NULL,
  -- clock_timestamp() of the change: later than the transaction start, so the visibility horizon
  -- (oldest open transaction) holds the entry back until it has committed, like a tombstone.
  rewritten_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (organization_id, kind, rewritten_at, record_id, seq)
);

-- Pruning walks rewritten_at across organizations.
CREATE INDEX dataset_rewrite_log_prune ON dataset_rewrite_log (rewritten_at);

-- Like dataset_tombstone_watermarks: the newest (rewritten_at, record_id) pruned of each kind.
CREATE TABLE dataset_rewrite_watermarks (
  organization_id uuid NOT NULL,
  kind text NOT NULL,
  pruned_through_at timestamptz NOT NULL,
  pruned_through_id uuid NOT NULL,
  PRIMARY KEY (organization_id, kind)
);

-- The feeds whose rows can show a record of this kind: resource tables, 'deviations', and 'form' (every
-- submission dataset: its envelope's live site). The same map as REWRITE_REFERENCES in
-- packages/datasets/src/sql/rewrites-query.ts (services/catalog/test/rewrite-counters.test.ts checks).
CREATE FUNCTION rewrite_kind_feeds(kind text) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    WHEN 'sites' THEN ARRAY['equipment', 'areas', 'lots', 'products', 'chemicals', 'employees', 'documents', 'deviations', 'form']
    WHEN 'teams' THEN ARRAY['employees', 'documents', 'deviations']
    WHEN 'employees' THEN ARRAY['deviations']
    WHEN 'suppliers' THEN ARRAY['products', 'suppliers', 'deviations']
    WHEN 'customers' THEN ARRAY['products']
    WHEN 'products' THEN ARRAY['suppliers', 'customers', 'lots', 'recipes']
    WHEN 'product_categories' THEN ARRAY['products', 'product_categories']
    WHEN 'areas' THEN ARRAY['equipment', 'areas']
    WHEN 'documents' THEN ARRAY['documents']
    WHEN 'document_versions' THEN ARRAY['documents']
    WHEN 'product_links' THEN ARRAY['products']
    WHEN 'submissions' THEN ARRAY['deviations']
    WHEN 'submission_steps' THEN ARRAY['deviations']
    WHEN 'forms' THEN ARRAY['deviations']
    WHEN 'deviation_notes' THEN ARRAY['deviations']
    ELSE ARRAY[]::text[] END
$$;

-- Moves the changeToken of the organizations' datasets fed by those feeds (so a client that skips
-- unchanged datasets reads their rewrite feed), with the settles_at rule of 040. One row per dataset
-- and statement, whatever the rows: which rows show the record is decided when the feed is read.
CREATE FUNCTION bump_rewritten_datasets(organizations uuid[], feeds text[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO dataset_changes AS c (organization_id, dataset, version, changed_at, settles_at)
    SELECT k.organization_id, k.key, 1, clock_timestamp(), clock_timestamp() FROM (
      SELECT DISTINCT r.organization_id, r.key FROM dataset_registry r
       WHERE r.organization_id = ANY (organizations) AND r.state <> 'retired'
         AND CASE r.kind WHEN 'resource' THEN r.source_ref = ANY (feeds)
                         WHEN 'deviations' THEN 'deviations' = ANY (feeds)
                         WHEN 'submission' THEN 'form' = ANY (feeds)
                         ELSE false END) k
    ON CONFLICT (organization_id, dataset) DO UPDATE SET version = c.version + 1, changed_at = excluded.changed_at,
      settles_at = greatest(c.settles_at, excluded.settles_at)
$$;

-- The one writer of the log: one entry per (organization, record) and statement.
CREATE FUNCTION log_rewrites(kind text, orgs uuid[], ids uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF ids IS NULL OR cardinality(ids) = 0 THEN RETURN; END IF;
  -- Deduplicated first: see 020 for why DISTINCT must not see clock_timestamp().
  INSERT INTO dataset_rewrite_log (organization_id, kind, record_id)
    SELECT d.o, kind, d.i FROM (SELECT DISTINCT o, i FROM unnest(orgs, ids) AS c(o, i)) d;
  PERFORM bump_rewritten_datasets(ARRAY(SELECT DISTINCT unnest(orgs)), rewrite_kind_feeds(kind));
END $$;

-- Named records renamed or deleted. TG_ARGV[0]: the displayed columns, comma-separated; TG_ARGV[1]:
-- the column naming the record (default id; a document version names its document).
CREATE FUNCTION log_named_record_rewrites() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  displayed text[] := string_to_array(TG_ARGV[0], ',');
  record_column text := coalesce(TG_ARGV[1], 'id');
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'UPDATE' THEN
    SELECT array_agg(n.organization_id), array_agg(CASE record_column WHEN 'id' THEN n.id ELSE (to_jsonb(n) ->> record_column)::uuid END) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE EXISTS (SELECT 1 FROM unnest(displayed) AS c(name) WHERE to_jsonb(o) -> c.name IS DISTINCT FROM to_jsonb(n) -> c.name);
  ELSE
    SELECT array_agg(o.organization_id), array_agg(CASE record_column WHEN 'id' THEN o.id ELSE (to_jsonb(o) ->> record_column)::uuid END) INTO orgs, ids FROM old_rows o;
  END IF;
  PERFORM log_rewrites(TG_TABLE_NAME, orgs, ids);
  RETURN NULL;
END $$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('sites', 'name,path,time_zone', NULL), ('teams', 'name', NULL), ('employees', 'first_name,last_name', NULL),
    ('suppliers', 'name', NULL), ('customers', 'name', NULL), ('products', 'name', NULL), ('product_categories', 'name', NULL),
    ('areas', 'name,path', NULL), ('documents', 'name', NULL),
    ('document_versions', 'version_label,is_current_published', 'document_id')) AS v(tbl, displayed, record_column)
  LOOP
    -- 046's organization-wide bumps give way to the log.
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t.tbl || '_rewrites_upd', t.tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t.tbl || '_rewrites_del', t.tbl);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION log_named_record_rewrites(%L%s)',
                   t.tbl || '_rewrite_log_upd', t.tbl, t.displayed, CASE WHEN t.record_column IS NULL THEN '' ELSE ', ' || quote_literal(t.record_column) END);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION log_named_record_rewrites(%L%s)',
                   t.tbl || '_rewrite_log_del', t.tbl, t.displayed, CASE WHEN t.record_column IS NULL THEN '' ELSE ', ' || quote_literal(t.record_column) END);
  END LOOP;
END $$;

-- 110: a named record inserted under an id rows already name. Same triggers and probes (one
-- semi-join per referencing column and statement, rows of the inserting transaction not counted),
-- now logging the records found instead of moving the organization's counter.
CREATE OR REPLACE FUNCTION bump_dataset_rewrites_when_named() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ref text;
  orgs uuid[];
  ids uuid[];
  all_orgs uuid[] := '{}';
  all_ids uuid[] := '{}';
BEGIN
  FOREACH ref IN ARRAY TG_ARGV LOOP
    EXECUTE format(
      'SELECT array_agg(n.organization_id), array_agg(n.id) FROM new_rows n
        WHERE EXISTS (SELECT 1 FROM %I r WHERE r.organization_id = n.organization_id AND r.%I = n.id AND r.xmin <> pg_current_xact_id()::xid)',
      split_part(ref, '.', 1), split_part(ref, '.', 2))
      INTO orgs, ids;
    all_orgs := all_orgs || coalesce(orgs, '{}');
    all_ids := all_ids || coalesce(ids, '{}');
  END LOOP;
  PERFORM log_rewrites(TG_TABLE_NAME, all_orgs, all_ids);
  RETURN NULL;
END $$;

-- 105's relations: a product lists the suppliers and customers linked to it; the changed pairs' products.
CREATE OR REPLACE FUNCTION bump_dataset_rewrites_from_links() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(organization_id), array_agg(product_id) INTO orgs, ids FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(organization_id), array_agg(product_id) INTO orgs, ids FROM old_rows;
  ELSE
    SELECT array_agg(organization_id), array_agg(product_id) INTO orgs, ids FROM (
      SELECT organization_id, product_id FROM (SELECT * FROM new_rows EXCEPT SELECT * FROM old_rows) a
      UNION SELECT organization_id, product_id FROM (SELECT * FROM old_rows EXCEPT SELECT * FROM new_rows) b) changed;
  END IF;
  PERFORM log_rewrites('product_links', orgs, ids);
  RETURN NULL;
END $$;

-- 105's borrowed columns of deviations, same probes: the submissions a deviation shows (its own or linked).
CREATE OR REPLACE FUNCTION bump_deviation_rewrites_from_submissions() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids FROM new_rows n
     WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.linked_record_id = n.id);
  ELSIF TG_OP = 'DELETE' THEN
    -- A deleted submission's own deviations go with it (tombstones); the linking ones show empty cells.
    SELECT array_agg(o.organization_id), array_agg(o.id) INTO orgs, ids FROM old_rows o
     WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = o.organization_id AND d.linked_record_id = o.id);
  ELSE
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE (o.record_id, o.status, o.is_archived, o.site_id, o.form_id) IS DISTINCT FROM (n.record_id, n.status, n.is_archived, n.site_id, n.form_id)
       AND (EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.submission_id = n.id)
            OR EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.linked_record_id = n.id));
  END IF;
  PERFORM log_rewrites('submissions', orgs, ids);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION bump_deviation_rewrites_from_steps() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids FROM new_rows n
     WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.step_id = n.id);
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(o.organization_id), array_agg(o.id) INTO orgs, ids FROM old_rows o
     WHERE EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = o.organization_id AND d.step_id = o.id);
  ELSE
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE (o.name, o.status) IS DISTINCT FROM (n.name, n.status)
       AND EXISTS (SELECT 1 FROM deviations d WHERE d.organization_id = n.organization_id AND d.step_id = n.id);
  END IF;
  PERFORM log_rewrites('submission_steps', orgs, ids);
  RETURN NULL;
END $$;

-- A form's name: the deviations of its submissions and those linking to them (found when read).
CREATE OR REPLACE FUNCTION bump_deviation_rewrites_from_forms() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'DELETE' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM old_rows;
  ELSE
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE o.name IS DISTINCT FROM n.name;
  END IF;
  PERFORM log_rewrites('forms', orgs, ids);
  RETURN NULL;
END $$;

-- 111: a deviation's note changed while its last_modified stayed: the deviation itself.
CREATE OR REPLACE FUNCTION bump_deviation_note_rewrites() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
    FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
   WHERE n.comment IS DISTINCT FROM o.comment AND n.last_modified = o.last_modified;
  PERFORM log_rewrites('deviation_notes', orgs, ids);
  RETURN NULL;
END $$;
