-- The rewrite feed (GET /v1/datasets/{datasetKey}/rewrites, docs/api.md "Deletions and rewrites").
--
-- 046, 105, 110 and 111 moved rewrite counters when a change rewrote exported text without moving
-- last_modified (a renamed, deleted or newly named related record; a relation or borrowed column; a
-- deviation's note), and every consumer re-read the dataset (046: every dataset of the organization)
-- in full. The rows such a change rewrites are knowable: they are the rows whose reference column holds
-- the changed record's id. The same triggers now log those rows, one entry per row, in the same
-- transaction as the change, and the feed serves their current text; the counters no longer move for
-- these changes, so rewriteToken moves only for what the feed cannot express (a regeneration).
--
-- scope names the feed like dataset_tombstones.scope (045): the resource table, 'deviations', or
-- 'form:<form id>' (the form's submission dataset and every grid; id is the submission's).
CREATE TABLE dataset_rewrite_log (
  organization_id uuid NOT NULL,
  scope text NOT NULL,
  id uuid NOT NULL,
  -- clock_timestamp() of the change: later than the transaction start, so the visibility horizon
  -- (oldest open transaction) holds the entry back until it has committed, like a tombstone.
  rewritten_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (organization_id, scope, rewritten_at, id, seq)
);

-- Pruning walks rewritten_at across organizations.
CREATE INDEX dataset_rewrite_log_prune ON dataset_rewrite_log (rewritten_at);
-- The feed serves a row once, at its latest entry: "is there a later entry of this row" is one probe.
CREATE INDEX dataset_rewrite_log_latest ON dataset_rewrite_log (organization_id, scope, id, rewritten_at);

-- Like dataset_tombstone_watermarks: the newest (rewritten_at, id) pruned from each feed.
CREATE TABLE dataset_rewrite_watermarks (
  organization_id uuid NOT NULL,
  scope text NOT NULL,
  pruned_through_at timestamptz NOT NULL,
  pruned_through_id uuid NOT NULL,
  PRIMARY KEY (organization_id, scope)
);

-- Moves the changeToken of the datasets fed by the scopes that just got entries (so a client that
-- skips unchanged datasets reads their rewrite feed), with the settles_at rule of 040.
CREATE FUNCTION bump_rewritten_datasets(organizations uuid[], scopes text[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO dataset_changes AS c (organization_id, dataset, version, changed_at, settles_at)
    SELECT k.organization_id, k.key, 1, clock_timestamp(), clock_timestamp() FROM (
      SELECT DISTINCT r.organization_id, r.key
        FROM (SELECT DISTINCT o, s FROM unnest(organizations, scopes) AS e(o, s)) e
        JOIN dataset_registry r ON r.organization_id = e.o AND r.state <> 'retired'
       WHERE CASE WHEN e.s LIKE 'form:%' THEN r.kind IN ('submission', 'grid') AND r.source_ref LIKE substr(e.s, 6) || '%'
                  WHEN e.s = 'deviations' THEN r.kind = 'deviations'
                  ELSE r.kind = 'resource' AND r.source_ref = e.s END) k
    ON CONFLICT (organization_id, dataset) DO UPDATE SET version = c.version + 1, changed_at = excluded.changed_at,
      settles_at = greatest(c.settles_at, excluded.settles_at)
$$;

-- Logs the rows that `select_rows` returns (organization_id, scope, id) and moves their datasets'
-- changeTokens. The one writer of the log.
CREATE FUNCTION log_rewritten_rows(select_rows text, changed_orgs uuid[], changed_ids uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  scopes text[];
BEGIN
  EXECUTE format(
    'WITH logged AS (
       INSERT INTO dataset_rewrite_log (organization_id, scope, id)
       SELECT DISTINCT organization_id, scope, id FROM (%s) x
       RETURNING organization_id, scope)
     SELECT array_agg(organization_id), array_agg(scope) FROM (SELECT DISTINCT organization_id, scope FROM logged) d', select_rows)
    INTO orgs, scopes USING changed_orgs, changed_ids;
  IF orgs IS NOT NULL THEN
    PERFORM bump_rewritten_datasets(orgs, scopes);
  END IF;
END $$;

-- A reference: '<scope>|<table>|<reference column>|<row id column>'. Scope 'form' is the row's form
-- (submissions). The table 'deviation_sites' is a deviation's submission's site.
CREATE FUNCTION rewritten_rows_sql(ref text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT format(
    'SELECT r.organization_id, %s AS scope, r.%I AS id FROM unnest($1::uuid[], $2::uuid[]) AS c(organization_id, id)
       JOIN %s r ON r.organization_id = c.organization_id AND r.%I = c.id',
    CASE split_part(ref, '|', 1) WHEN 'form' THEN $f$'form:' || r.form_id::text$f$ ELSE quote_literal(split_part(ref, '|', 1)) END,
    split_part(ref, '|', 4),
    CASE split_part(ref, '|', 2)
      WHEN 'deviation_sites' THEN '(SELECT d.organization_id, d.id, s.site_id FROM deviations d JOIN submissions s ON s.organization_id = d.organization_id AND s.id = d.submission_id)'
      ELSE quote_ident(split_part(ref, '|', 2)) END,
    split_part(ref, '|', 3))
$$;

-- Named records. TG_ARGV[0]: the displayed columns, comma-separated; the rest: the references (above).
-- A record renamed (a displayed column changed), deleted, or inserted under an id rows already name
-- rewrites the rows that reference it.
CREATE FUNCTION log_named_record_rewrites() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  displayed text[] := string_to_array(TG_ARGV[0], ',');
  orgs uuid[];
  ids uuid[];
  i int;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE EXISTS (SELECT 1 FROM unnest(displayed) AS c(name) WHERE to_jsonb(o) -> c.name IS DISTINCT FROM to_jsonb(n) -> c.name);
  ELSIF TG_OP = 'INSERT' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM new_rows;
  ELSE
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM old_rows;
  END IF;
  IF ids IS NULL THEN RETURN NULL; END IF;
  FOR i IN 1 .. coalesce(array_length(TG_ARGV, 1), 0) - 1 LOOP
    PERFORM log_rewritten_rows(rewritten_rows_sql(TG_ARGV[i]), orgs, ids);
  END LOOP;
  RETURN NULL;
END $$;

-- The old triggers moved the organization's counter; these log rows instead. The references are the
-- export's (packages/datasets/src/sql/resources.ts, deviations.ts; a form dataset's live site);
-- services/catalog/test/rewrite-counters.test.ts derives them from the export's SQL.
DO $$
DECLARE
  t record;
  args text;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('sites', 'name,path,time_zone', ARRAY['equipment|equipment|site_id|id', 'areas|areas|site_id|id', 'lots|lots|site_id|id',
              'form|submissions|site_id|id', 'products|product_sites|site_id|product_id', 'chemicals|chemical_sites|site_id|chemical_id',
              'employees|employee_sites|site_id|employee_id', 'documents|document_sites|site_id|document_id',
              'deviations|deviation_sites|site_id|id'], true),
    ('teams', 'name', ARRAY['employees|employee_teams|team_id|employee_id', 'documents|document_teams|team_id|document_id',
              'deviations|deviations|assigned_team_id|id'], true),
    ('employees', 'first_name,last_name', ARRAY['deviations|deviations|assigned_user_id|id', 'deviations|deviations|resolved_by_id|id',
              'deviations|deviations|signed_by_id|id'], true),
    ('suppliers', 'name', ARRAY['products|supplier_products|supplier_id|product_id', 'suppliers|supplier_parents|parent_supplier_id|supplier_id',
              'deviations|deviations|supplier_id|id'], true),
    ('customers', 'name', ARRAY['products|customer_products|customer_id|product_id'], true),
    ('products', 'name', ARRAY['suppliers|supplier_products|product_id|supplier_id', 'customers|customer_products|product_id|customer_id',
              'lots|lots|product_id|id', 'recipes|recipes|output_product_id|id'], true),
    ('product_categories', 'name', ARRAY['products|products|product_category_id|id', 'product_categories|product_categories|parent_id|id'], true),
    ('areas', 'name,path', ARRAY['equipment|equipment|area_id|id', 'areas|areas|parent_id|id'], true),
    -- A document's own name and its current version's label: the document's own row.
    ('documents', 'name', ARRAY['documents|documents|id|id'], false),
    ('document_versions', 'version_label,is_current_published', ARRAY['documents|document_versions|id|document_id'], false)) AS v(tbl, displayed, refs, on_insert)
  LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t.tbl || '_rewrites_upd', t.tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t.tbl || '_rewrites_del', t.tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t.tbl || '_named_rewrites', t.tbl);
    args := quote_literal(t.displayed) || ', ' || (SELECT string_agg(quote_literal(r), ', ') FROM unnest(t.refs) r);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION log_named_record_rewrites(%s)',
                   t.tbl || '_rewrite_log_upd', t.tbl, args);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION log_named_record_rewrites(%s)',
                   t.tbl || '_rewrite_log_del', t.tbl, args);
    IF t.on_insert THEN
      EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION log_named_record_rewrites(%s)',
                     t.tbl || '_rewrite_log_ins', t.tbl, args);
    END IF;
  END LOOP;
END $$;

-- 105's relations: a product lists the suppliers and customers linked to it. The changed pairs'
-- products are rewritten (TG_ARGV is the dataset 105 counted; the feed is the products').
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
  IF ids IS NOT NULL THEN
    PERFORM log_rewritten_rows(rewritten_rows_sql('products|products|id|id'), orgs, ids);
  END IF;
  RETURN NULL;
END $$;

-- 105's borrowed columns of deviations: the deviations showing a changed submission, step or form.
CREATE OR REPLACE FUNCTION bump_deviation_rewrites_from_submissions() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM old_rows;
  ELSE
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE (o.record_id, o.status, o.is_archived, o.site_id, o.form_id) IS DISTINCT FROM (n.record_id, n.status, n.is_archived, n.site_id, n.form_id);
  END IF;
  IF ids IS NULL THEN RETURN NULL; END IF;
  PERFORM log_rewritten_rows(rewritten_rows_sql('deviations|deviations|linked_record_id|id'), orgs, ids);
  IF TG_OP = 'UPDATE' THEN
    -- A deleted submission's own deviations go with it (tombstones); an inserted one has none yet.
    PERFORM log_rewritten_rows(rewritten_rows_sql('deviations|deviations|submission_id|id'), orgs, ids);
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION bump_deviation_rewrites_from_steps() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs uuid[];
  ids uuid[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(organization_id), array_agg(id) INTO orgs, ids FROM old_rows;
  ELSE
    SELECT array_agg(n.organization_id), array_agg(n.id) INTO orgs, ids
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE (o.name, o.status) IS DISTINCT FROM (n.name, n.status);
  END IF;
  IF ids IS NOT NULL THEN
    PERFORM log_rewritten_rows(rewritten_rows_sql('deviations|deviations|step_id|id'), orgs, ids);
  END IF;
  RETURN NULL;
END $$;

-- A form's name: the deviations of its submissions and those linking to them.
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
  IF ids IS NOT NULL THEN
    PERFORM log_rewritten_rows(
      'SELECT d.organization_id, ''deviations'' AS scope, d.id FROM unnest($1::uuid[], $2::uuid[]) AS c(organization_id, id)
         JOIN submissions s ON s.organization_id = c.organization_id AND s.form_id = c.id
         JOIN deviations d ON d.organization_id = s.organization_id AND (d.submission_id = s.id OR d.linked_record_id = s.id)', orgs, ids);
  END IF;
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
  IF ids IS NOT NULL THEN
    PERFORM log_rewritten_rows(rewritten_rows_sql('deviations|deviations|id|id'), orgs, ids);
  END IF;
  RETURN NULL;
END $$;
