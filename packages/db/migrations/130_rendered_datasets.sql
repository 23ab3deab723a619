-- Rendered resource datasets and deviations (docs/export.md, "Rendered datasets"). The schema
-- service renders a resource dataset's (or deviations') rows once into a table of the organization's
-- own schema (form_ds_<organization id without dashes>, next to its form tables): each row's CSV
-- record up to its `_cursor` in one text column, the signed `_cursor` stored. A page is served from that table only while nothing it
-- was rendered from has changed since, which the page checks in its own statement against the
-- counters recorded here; otherwise it is read live, as before. Writers pay nothing: no trigger is
-- added, the counters below already move with every write.
CREATE TABLE rendered_datasets (
  organization_id uuid NOT NULL,
  dataset text NOT NULL,
  -- Schema-qualified; a new table whenever the dataset's columns change. NULL: not rendered, the
  -- dataset held fewer rows than RENDERED_DATASETS_MIN_ROWS at its last render (read live).
  table_name text,
  -- The registry columns the table's records hold, in order.
  columns jsonb NOT NULL,
  -- The rendering code's version (RENDER_VERSION in packages/datasets/src/rendered.ts).
  render_version integer NOT NULL,
  -- What the rows were rendered from, as of the render's snapshot: dataset_changes.version of the
  -- dataset, dataset_rewrites.version of the organization, dataset_rewrite_counters.version of the
  -- dataset, and the rewrite log's entries of the kinds the rows show from rewrites_from (the
  -- visibility horizon taken before the render: an entry the render did not see is stamped at or
  -- after it) on.
  source_version bigint NOT NULL,
  organization_rewrites bigint NOT NULL,
  dataset_rewrites bigint NOT NULL,
  rewrites_from timestamptz NOT NULL,
  rewrite_entries bigint NOT NULL,
  -- The stored cursors' signature (CursorCodec.storedSignature); NULL: none stored.
  cursor_signature text,
  rendered_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The last render's duration: the next one waits a multiple of it (a dataset under constant writes
  -- is re-rendered at a bounded duty, and read live meanwhile).
  render_ms integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, dataset)
);

-- Tables replaced by a new one (columns changed, dataset gone): dropped after a grace, so a page
-- planned against the old table a moment before still finds it.
CREATE TABLE rendered_dataset_retired_tables (
  organization_id uuid NOT NULL,
  table_name text NOT NULL,
  retired_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, table_name)
);
